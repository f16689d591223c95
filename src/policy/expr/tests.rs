//! Tests of [`super`] (`expr`).

use super::*;
use crate::knobs::{CpufreqAttr, GroupKnob};
use crate::units::CpuList;
use proptest::prelude::*;

fn parse(src: &str) -> Expr {
    match parse_expr(src) {
        Ok(e) => e,
        Err(e) => panic!("{src:?}: {e}"),
    }
}

fn fails(src: &str) -> ParseError {
    match parse_expr(src) {
        Ok(e) => panic!("{src:?} parsed as {e}"),
        Err(e) => e,
    }
}

fn compare(src: &str) -> Compare {
    match parse(src).kind {
        ExprKind::Compare(c) => c,
        other => panic!("{src:?} is not a comparison: {other:?}"),
    }
}

fn group(name: &str) -> Spanned<String> {
    Spanned::new(name.to_string(), Span::default())
}

fn target(name: &str) -> Spanned<Target> {
    let t = if name == "host" {
        Target::Host
    } else {
        Target::Group(name.to_string())
    };
    Spanned::new(t, Span::default())
}

fn ms(n: u64) -> Duration {
    Duration(std::time::Duration::from_millis(n))
}

#[test]
fn psi_average() {
    let c = compare("inference.memory.some.avg10 > 10%");
    assert_eq!(
        c.metric,
        Metric::PsiAvg {
            target: target("inference"),
            resource: Resource::Memory,
            stall: Stall::Some,
            avg: Avg::Avg10
        }
    );
    assert_eq!(c.op, CmpOp::Gt);
    assert_eq!(c.value, Threshold::Percent(Percent(10.0)));
    assert_eq!(c.value_span, Span::new(30, 33));
    let c = compare("host.io.full.avg300>=12.5%");
    assert_eq!(
        c.metric,
        Metric::PsiAvg {
            target: target("host"),
            resource: Resource::Io,
            stall: Stall::Full,
            avg: Avg::Avg300
        }
    );
    assert_eq!(c.op, CmpOp::Ge);
    assert_eq!(c.value, Threshold::Percent(Percent(12.5)));
    let c = compare("g.cpu.some.avg60 != 0%");
    assert_eq!(c.op, CmpOp::Ne);
}

#[test]
fn psi_stall_time() {
    let c = compare("inference.cpu.some > 100ms/1s");
    assert_eq!(
        c.metric,
        Metric::PsiStall {
            target: target("inference"),
            resource: Resource::Cpu,
            stall: Stall::Some
        }
    );
    assert_eq!(
        c.value,
        Threshold::StallTime {
            amount: ms(100),
            window: ms(1000)
        }
    );
    let c = compare("g.memory.full >= 150ms/500ms");
    assert_eq!(c.op, CmpOp::Ge);
    assert!(parse_expr("g.io.some > 10s/10s").is_ok());
}

#[test]
fn other_metrics() {
    let c = compare("vision.memory.current > 3584M");
    assert_eq!(
        c.metric,
        Metric::MemoryCurrent {
            group: group("vision")
        }
    );
    assert_eq!(c.value, Threshold::Size(Size::Bytes(3584 << 20)));
    let c = compare("vision.memory.swap.current >= 0");
    assert_eq!(
        c.metric,
        Metric::SwapCurrent {
            group: group("vision")
        }
    );
    for (name, event) in [
        ("high", MemEvent::High),
        ("max", MemEvent::Max),
        ("oom", MemEvent::Oom),
        ("oom_kill", MemEvent::OomKill),
        ("oom_group_kill", MemEvent::OomGroupKill),
    ] {
        let c = compare(&format!("rt.memory.events.{name} > 0"));
        assert_eq!(
            c.metric,
            Metric::MemoryEvent {
                group: group("rt"),
                event
            }
        );
        assert_eq!(
            c.value,
            Threshold::Events {
                count: 0,
                window: None
            }
        );
    }
    let c = compare("rt.memory.events.high > 5/10s");
    assert_eq!(
        c.value,
        Threshold::Events {
            count: 5,
            window: Some(ms(10_000))
        }
    );
    assert_eq!(c.value_span, Span::new(24, 29));
    assert_eq!(c.value.to_string(), "5/10s");
    let c = compare("rt.memory.events.oom_kill >= 0/1h");
    assert_eq!(c.op, CmpOp::Ge);
    assert_eq!(
        c.value,
        Threshold::Events {
            count: 0,
            window: Some(ms(3_600_000))
        }
    );
    for ok in ["1s", "1500ms", "1m30s", "59m59s999ms", "1h"] {
        assert!(
            parse_expr(&format!("g.memory.events.max > 1/{ok}")).is_ok(),
            "{ok}"
        );
    }
    let c = compare("rt.pids.current > 400");
    assert_eq!(c.metric, Metric::PidsCurrent { group: group("rt") });
    let c = compare("rt.cgroup.populated == 1");
    assert_eq!(c.metric, Metric::Populated { group: group("rt") });
    let c = compare("host.memory.available < 256M");
    assert_eq!(c.metric, Metric::MemoryAvailable);
    assert_eq!(c.op, CmpOp::Lt);
    let c = compare("thermal.cpu-0-0-usr.temp > 85C");
    assert_eq!(
        c.metric,
        Metric::ThermalTemp {
            zone: group("cpu-0-0-usr")
        }
    );
    assert_eq!(
        c.value,
        Threshold::Temperature(Temperature {
            millidegrees: 85_000
        })
    );
    if let Metric::ThermalTemp { zone } = &c.metric {
        assert_eq!(zone.span, Span::new(8, 19));
    }
    let c = compare("thermal.soc.thermal.temp <= -10C");
    assert_eq!(
        c.metric,
        Metric::ThermalTemp {
            zone: group("soc.thermal")
        }
    );
    // A group called `thermal` is still reachable.
    let c = compare("thermal.memory.current > 1G");
    assert_eq!(
        c.metric,
        Metric::MemoryCurrent {
            group: group("thermal")
        }
    );
}

#[test]
fn calls() {
    assert_eq!(
        parse("running(cyclictest)").kind,
        ExprKind::Running("cyclictest".into())
    );
    assert_eq!(
        parse("running( 'cam*' )").kind,
        ExprKind::Running("cam*".into())
    );
    assert_eq!(
        parse("running(\"my proc\")").kind,
        ExprKind::Running("my proc".into())
    );
    assert_eq!(
        parse("running(kworker/0:1)").kind,
        ExprKind::Running("kworker/0:1".into())
    );
    assert_eq!(
        parse("running(camera_pipeline_*)").kind,
        ExprKind::Running("camera_pipeline_*".into())
    );
    let e = parse("exists(vision)");
    match &e.kind {
        ExprKind::Exists(g) => {
            assert_eq!(g.value, "vision");
            assert_eq!(g.span, Span::new(7, 13));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(e.span, Span::new(0, 14));
}

#[test]
fn precedence() {
    let running = |n: &str| Expr {
        kind: ExprKind::Running(n.into()),
        span: Span::default(),
    };
    let bx = Box::new;
    let or = |l, r| Expr {
        kind: ExprKind::Or(bx(l), bx(r)),
        span: Span::default(),
    };
    let and = |l, r| Expr {
        kind: ExprKind::And(bx(l), bx(r)),
        span: Span::default(),
    };
    let not = |e| Expr {
        kind: ExprKind::Not(bx(e)),
        span: Span::default(),
    };
    let (a, b, c) = (running("a"), running("b"), running("c"));
    assert_eq!(
        parse("running(a) or running(b) and running(c)"),
        or(a.clone(), and(b.clone(), c.clone()))
    );
    assert_eq!(
        parse("running(a) and running(b) or running(c)"),
        or(and(a.clone(), b.clone()), c.clone())
    );
    assert_eq!(
        parse("(running(a) or running(b)) and running(c)"),
        and(or(a.clone(), b.clone()), c.clone())
    );
    assert_eq!(
        parse("not running(a) and running(b)"),
        and(not(a.clone()), b.clone())
    );
    assert_eq!(
        parse("not (running(a) and running(b))"),
        not(and(a.clone(), b.clone()))
    );
    assert_eq!(parse("not not running(a)"), not(not(a.clone())));
    assert_eq!(
        parse("running(a) or running(b) or running(c)"),
        or(or(a.clone(), b.clone()), c.clone())
    );
    // Printing keeps the structure.
    let right = or(a.clone(), or(b.clone(), c.clone()));
    assert_eq!(
        right.to_string(),
        "running(a) or (running(b) or running(c))"
    );
    assert_eq!(parse(&right.to_string()), right);
    let e = and(or(a.clone(), b), not(and(a, c)));
    assert_eq!(
        e.to_string(),
        "(running(a) or running(b)) and not (running(a) and running(c))"
    );
    assert_eq!(parse(&e.to_string()), e);
}

#[test]
fn keywords_vs_names() {
    // Group names that look like keywords stay metrics.
    let e = parse("not.cpu.some.avg10 > 1% or or.pids.current > 1");
    assert!(matches!(e.kind, ExprKind::Or(..)));
    assert!(parse_expr("running(a)or(running(b))").is_ok());
    assert!(parse_expr("notrunning(a)").is_err());
}

#[test]
fn spans() {
    let e = parse("running(a) and  g.pids.current > 5");
    assert_eq!(e.span, Span::new(0, 34));
    let groups = referenced_groups(&parse(
        "exists(b) and a.memory.current > 1G or host.cpu.some.avg10 > 5% or system.cpu.some > 1s/2s",
    ));
    // `host` is the machine; `system` is a group like any other.
    assert_eq!(
        groups,
        vec![
            ("b".to_string(), Span::new(7, 8)),
            ("a".to_string(), Span::new(14, 15)),
            ("system".to_string(), Span::new(67, 73)),
        ]
    );
    // Character offsets, not bytes.
    let e = parse("thermal.zone.temp > 72.5°C and infrence.pids.current > 1");
    assert_eq!(
        referenced_groups(&e),
        vec![("infrence".to_string(), Span::new(31, 39))]
    );
}

#[test]
fn errors_with_positions() {
    let cases: &[(&str, usize, &str)] = &[
        ("", 0, "found the end of the condition"),
        ("   ", 3, "found the end of the condition"),
        (
            "inference.memroy.some.avg10 > 10%",
            10,
            "did you mean `inference.memory.some.avg10`?",
        ),
        (
            "inference.memory.some.avg15 > 10%",
            22,
            "did you mean `inference.memory.some.avg10`?",
        ),
        (
            "g.memory.curent > 1G",
            9,
            "did you mean `g.memory.current`?",
        ),
        (
            "g.memory.evnts.oom > 1",
            9,
            "did you mean `g.memory.events.oom`?",
        ),
        ("g.frobnicate > 1", 2, "unknown metric `g.frobnicate`"),
        ("foo > 1", 0, "unknown metric `foo`"),
        (
            "Inference.cpu.some.avg10 > 1%",
            0,
            "invalid group name `Inference`",
        ),
        ("g..cpu > 1", 2, "empty part"),
        ("g.cpu.some.avg10 10%", 17, "expected a comparison"),
        ("g.cpu.some.avg10 = 10%", 17, "did you mean `==`?"),
        ("g.cpu.some.avg10 => 10%", 17, "did you mean `>=`?"),
        ("g.cpu.some.avg10 >", 18, "expected a value"),
        ("g.cpu.some.avg10 > )", 19, "expected a value"),
        ("g.cpu.some.avg10 > 10", 19, "a percentage"),
        ("g.cpu.some.avg10 > 101%", 19, "a percentage"),
        ("g.cpu.some > 10%", 13, "AMOUNT/WINDOW"),
        ("g.cpu.some < 1s/2s", 11, "only supports `>` or `>=`"),
        ("g.cpu.some == 1s/2s", 11, "only supports"),
        ("g.cpu.some > 1s/20s", 16, "between 500ms and 10s"),
        ("g.cpu.some > 1s/100ms", 16, "between 500ms and 10s"),
        ("g.cpu.some > 2s/1s", 13, "at most the window"),
        ("g.cpu.some > 0s/1s", 13, "greater than 0"),
        ("g.cpu.some > 1ns/1s", 13, "whole number of microseconds"),
        // `host` is the whole machine, never a group.
        (
            "host.memory.current > 1G",
            0,
            "`host` is the whole machine, not a group",
        ),
        (
            "host.memory.events.oom_kill > 0",
            0,
            "`host` is the whole machine, not a group",
        ),
        // A machine-only metric under `system` means the machine.
        (
            "system.memory.available < 1G",
            0,
            "did you mean `host.memory.available`?",
        ),
        (
            "system.vmstat.allocstall > 5",
            0,
            "did you mean `host.vmstat.allocstall`?",
        ),
        ("g.cpu.some > 100/1s", 13, "invalid duration"),
        ("g.memory.current > max", 19, "not `max`"),
        ("g.memory.current > 10%", 19, "byte size"),
        ("host.memory.available > 1.5", 24, "byte size"),
        ("g.pids.current > -1", 17, "whole number"),
        ("g.memory.events.oom > 1.5", 22, "whole number of events"),
        (
            "g.memory.events.oom > 1.5/10s",
            22,
            "whole number of events",
        ),
        ("g.memory.events.oom > /10s", 22, "whole number of events"),
        ("g.memory.events.high > 5/0s", 25, "between 1s and 1h"),
        ("g.memory.events.high > 5/999ms", 25, "between 1s and 1h"),
        ("g.memory.events.high > 5/2h", 25, "between 1s and 1h"),
        ("g.memory.events.high > 5/1h1ms", 25, "between 1s and 1h"),
        ("g.memory.events.high > 5/10", 25, "invalid duration `10`"),
        ("g.memory.events.high > 5/", 25, "invalid duration"),
        ("g.memory.events.high > 5/10s/1s", 25, "invalid duration"),
        (
            "g.memory.events.high > 5/1s1us",
            25,
            "whole number of milliseconds",
        ),
        ("g.memory.events.high > 12345/10parsecs", 29, "unknown unit"),
        (
            "g.memory.events.high < 5/10s",
            21,
            "only supports `>` or `>=`",
        ),
        ("g.memory.events.high <= 5", 21, "only supports `>` or `>=`"),
        ("g.memory.events.high == 0", 21, "use `not (...)`"),
        ("g.memory.events.high != 0/1s", 21, "only supports"),
        (
            "g.memory.current > 5/10s",
            20,
            "a window `/10s` only applies to event counts",
        ),
        (
            "g.pids.current >= 5/10s",
            19,
            "a window `/10s` only applies",
        ),
        (
            "g.cpu.some.avg10 > 10%/10s",
            22,
            "a window `/10s` only applies",
        ),
        ("thermal.x.temp > 85C/1s", 20, "a window"),
        ("g.cgroup.populated == 2", 22, "0 or 1"),
        ("thermal.x.temp > 85", 17, "temperature"),
        ("running(a) and", 14, "found the end of the condition"),
        // C's operators and a unit apart from its number say what to write.
        (
            "running(a) || running(b)",
            11,
            "found `||`; the rule language writes `or`, not `||`",
        ),
        ("running(a) | running(b)", 11, "writes `or`"),
        (
            "running(a) && running(b)",
            11,
            "found `&&`; the rule language writes `and`, not `&&`",
        ),
        ("(running(a) || running(b))", 12, "writes `or`"),
        (
            "!running(a)",
            0,
            "found `!`; the rule language writes `not`",
        ),
        ("running(a) and !running(b)", 15, "writes `not`"),
        (
            "g.cpu.some.avg10 > 25 %",
            19,
            "no space between a number and its unit: write `25%`",
        ),
        ("g.memory.current > 2 G", 19, "write `2G`"),
        ("thermal.x.temp > -5 C and running(a)", 17, "write `-5C`"),
        ("g.cpu.some > 150 ms/1s", 13, "write `150ms/1s`"),
        ("running(a) adn running(b)", 11, "did you mean `and`?"),
        ("running(a) running(b)", 11, "expected `and`, `or`"),
        ("and running(a)", 0, "expected a condition before `and`"),
        (
            "(running(a)",
            11,
            "expected `)` to close the `(` at character 0",
        ),
        ("running(a))", 10, "expected `and`, `or`"),
        ("runing(a)", 0, "did you mean `running`?"),
        ("running()", 8, "needs a process name"),
        ("running(a b)", 10, "expected `)`"),
        ("running('abc)", 13, "closing '"),
        (
            "running(camera_pipeline_main)",
            8,
            "write `camera_pipeline`",
        ),
        ("running(a[bc)", 9, "unclosed `[`"),
        ("exists(Bad)", 7, "needs a group name"),
        ("exists()", 7, "needs a group name"),
        ("g.cpu.some.avg10 > 10% or ", 26, "found the end"),
        ("() ", 1, "expected a condition"),
        ("!running(a)", 0, "expected a condition"),
    ];
    for (src, pos, needle) in cases {
        let e = fails(src);
        assert_eq!(e.pos, *pos, "{src:?}: {}", e.message);
        assert!(e.message.contains(needle), "{src:?}: {}", e.message);
    }
}

#[test]
fn limits() {
    let deep = format!("{}running(a){}", "(".repeat(100), ")".repeat(100));
    let e = fails(&deep);
    assert_eq!(e.pos, 64);
    assert!(e.message.contains("nested deeper than 64"));
    let nots = format!("{}running(a)", "not ".repeat(65));
    assert_eq!(fails(&nots).pos, 256);
    let ok = format!("{}running(a){}", "(".repeat(63), ")".repeat(63));
    assert!(parse_expr(&ok).is_ok());
    let long = "running(a) or ".repeat(300) + "running(b)";
    let e = fails(&long);
    assert_eq!(e.pos, MAX_CHARS);
    let many = "running(a) or ".repeat(250) + "running(b)";
    assert!(parse_expr(&many).is_ok());
}

#[test]
fn actions() {
    let a = |s: &str| match parse_action(s) {
        Ok(a) => a,
        Err(e) => panic!("{s:?}: {e}"),
    };
    let knob = |s: &str| Knob::parse(s).unwrap_or(Knob::Sysctl(String::new()));
    assert_eq!(
        a("raise inference.memory.high by 512M up to 10G"),
        Action::Raise {
            knob: knob("inference.memory.high"),
            by: KnobValue::Size(Size::Bytes(512 << 20)),
            limit: KnobValue::Size(Size::Bytes(10 << 30)),
        }
    );
    assert_eq!(
        a("lower vision.cpu.weight by 10 down to 1"),
        Action::Lower {
            knob: knob("vision.cpu.weight"),
            by: KnobValue::Weight(10),
            limit: KnobValue::Weight(1),
        }
    );
    assert_eq!(
        a("set cpufreq.policy4.min = 1.8GHz"),
        Action::Set {
            knob: Knob::Cpufreq {
                policy: "policy4".into(),
                attr: CpufreqAttr::Min
            },
            value: KnobValue::Frequency(crate::units::Frequency { khz: 1_800_000 }),
        }
    );
    assert_eq!(
        a("set sysctl.kernel.sched_rt_runtime_us=-1"),
        Action::Set {
            knob: Knob::Sysctl("kernel.sched_rt_runtime_us".into()),
            value: KnobValue::Int(-1)
        }
    );
    assert_eq!(
        a("raise sysctl.vm.page-cluster by 1 up to 3"),
        Action::Raise {
            knob: Knob::Sysctl("vm.page-cluster".into()),
            by: KnobValue::Int(1),
            limit: KnobValue::Int(3),
        }
    );
    assert_eq!(
        a("  set rt.cpuset.cpus =  0-3, 6  "),
        Action::Set {
            knob: Knob::Group {
                group: "rt".into(),
                knob: GroupKnob::CpusetCpus
            },
            value: KnobValue::CpuList(CpuList([0, 1, 2, 3, 6].into_iter().collect())),
        }
    );
    assert_eq!(a("hook alert"), Action::Hook("alert".into()));
    assert_eq!(a("compact memory"), Action::CompactMemory);
    assert_eq!(
        a("raise g.pids.max by 100 up to max"),
        Action::Raise {
            knob: knob("g.pids.max"),
            by: KnobValue::Count(Some(100)),
            limit: KnobValue::Count(None),
        }
    );
    assert!(a("set g.cpu.max = 50%").allowed_in_while());
    assert!(a("hook alert").allowed_in_while());
    assert!(!a("compact memory").allowed_in_while());
    assert!(!a("raise g.io.weight by 10 up to 500").allowed_in_while());
    assert!(!a("lower g.uclamp.min by 10% down to 0%").allowed_in_while());
    assert_eq!(a("hook alert").knob(), None);
    for text in [
        "set g.cpu.max = 50ms/100ms",
        "set cpufreq.policy7.governor = performance",
        "raise inference.memory.high by 512M up to 10G",
        "lower sysctl.vm.swappiness by 10 down to 0",
        "set sysctl.vm.page-cluster = 0",
        "raise cpufreq.policy4.min by 200MHz up to 2GHz",
        "hook alert",
        "compact memory",
    ] {
        assert_eq!(a(text).to_string(), text);
    }
}

#[test]
fn action_errors() {
    let cases: &[(&str, usize, &str)] = &[
        ("", 0, "empty action"),
        ("rase g.cpu.weight by 1 up to 5", 0, "did you mean `raise`?"),
        ("set", 3, "expected a knob"),
        ("set g.cpu.weight", 16, "expected `=`"),
        ("set g.cpu.weight 5", 17, "expected `=`"),
        ("set g.cpu.weight =", 18, "expected a value"),
        ("set g.cpu.weight = 0", 19, "invalid weight `0`"),
        (
            "set inference.memory.hgh = 1G",
            4,
            "did you mean `inference.memory.high`?",
        ),
        (
            "set sysctl.net.core.x = 1",
            4,
            "limited to the closed table",
        ),
        ("raise g.memory.high", 19, "incomplete action"),
        ("raise g.memory.high by 1G to 2G", 26, "expected `up`"),
        ("raise g.memory.high by 1G down to 2G", 26, "expected `up`"),
        ("lower g.memory.high by 1G up to 2G", 26, "expected `down`"),
        ("raise g.memory.high with 1G up to 2G", 20, "expected `by`"),
        (
            "raise g.memory.high by 1G up to 2G now",
            35,
            "unexpected `now`",
        ),
        ("raise g.cpu.max by 10% up to 90%", 6, "not numeric"),
        ("raise g.cpuset.cpus by 1 up to 4", 6, "not numeric"),
        (
            "raise cpufreq.policy0.governor by 1 up to 4",
            6,
            "not numeric",
        ),
        ("raise g.memory.high by 0 up to 2G", 23, "positive"),
        ("raise g.memory.high by max up to 2G", 23, "positive"),
        ("raise g.pids.max by max up to 2", 20, "positive"),
        // dirty_bytes has no range in the table: the step check speaks.
        (
            "lower sysctl.vm.dirty_bytes by -5 down to 0",
            31,
            "positive",
        ),
        // swappiness has one, and -5 is outside it.
        (
            "lower sysctl.vm.swappiness by -5 down to 0",
            30,
            "from 0 to 200",
        ),
        (
            "raise g.memory.high by 1G up to 2Q",
            32,
            "invalid size `2Q`",
        ),
        ("lower g.memory.high by 1G down to max", 34, "finite limit"),
        ("hook", 4, "expected a hook name"),
        ("hook Alert", 5, "invalid hook name"),
        ("hook a b", 7, "unexpected `b`"),
        ("compact", 7, "expected `memory`"),
        ("compact mem", 8, "expected `compact memory`"),
        ("compact memory now", 15, "unexpected `now`"),
        ("sét g.cpu.weight = 1", 0, "unknown action"),
        (
            "raise é.memory.high by 1G up to 2G",
            6,
            "invalid group name",
        ),
    ];
    for (src, pos, needle) in cases {
        match parse_action(src) {
            Ok(a) => panic!("{src:?} parsed as {a}"),
            Err(e) => {
                assert_eq!(e.pos, *pos, "{src:?}: {}", e.message);
                assert!(e.message.contains(needle), "{src:?}: {}", e.message);
            }
        }
    }
    let long = "hook ".to_string() + &"a".repeat(5000);
    assert_eq!(parse_action(&long).map_err(|e| e.pos), Err(MAX_CHARS));
}

// -- property tests: parse(print(ast)) == ast, ignoring spans ----------

fn sp<T>(value: T) -> Spanned<T> {
    Spanned::new(value, Span::default())
}

fn arb_group() -> impl Strategy<Value = String> {
    "[a-z0-9][a-z0-9_-]{0,12}"
}

fn arb_target() -> impl Strategy<Value = Target> {
    prop_oneof![
        Just(Target::Host),
        arb_group()
            .prop_filter("host is the machine", |g| g != "host")
            .prop_map(Target::Group),
    ]
}

fn arb_size() -> impl Strategy<Value = Threshold> {
    (any::<u64>(), 0u32..40).prop_map(|(b, s)| Threshold::Size(Size::Bytes(b >> s << s)))
}

fn arb_compare() -> impl Strategy<Value = ExprKind> {
    let op = prop_oneof![
        Just(CmpOp::Gt),
        Just(CmpOp::Ge),
        Just(CmpOp::Lt),
        Just(CmpOp::Le),
        Just(CmpOp::Eq),
        Just(CmpOp::Ne),
    ];
    let resource = prop::sample::select(Resource::ALL);
    let stall = prop::sample::select(Stall::ALL);
    let avg = prop::sample::select(Avg::ALL);
    let percent = (0u32..=10_000).prop_map(|h| Threshold::Percent(Percent(f64::from(h) / 100.0)));
    let psi_avg = (
        arb_target(),
        resource.clone(),
        stall.clone(),
        avg,
        op.clone(),
        percent,
    )
        .prop_map(|(t, resource, stall, avg, op, v)| {
            (
                Metric::PsiAvg {
                    target: sp(t),
                    resource,
                    stall,
                    avg,
                },
                op,
                v,
            )
        });
    let stall_time = (500_000u64..=10_000_000)
        .prop_flat_map(|w| (1u64..=w, Just(w)))
        .prop_map(|(a, w)| Threshold::StallTime {
            amount: Duration(std::time::Duration::from_micros(a)),
            window: Duration(std::time::Duration::from_micros(w)),
        });
    let psi_stall = (
        arb_target(),
        resource,
        stall,
        prop_oneof![Just(CmpOp::Gt), Just(CmpOp::Ge)],
        stall_time,
    )
        .prop_map(|(t, resource, stall, op, v)| {
            (
                Metric::PsiStall {
                    target: sp(t),
                    resource,
                    stall,
                },
                op,
                v,
            )
        });
    let bytes = (arb_group(), 0u8..3, op.clone(), arb_size()).prop_map(|(g, which, op, v)| {
        let m = match which {
            0 => Metric::MemoryCurrent { group: sp(g) },
            1 => Metric::SwapCurrent { group: sp(g) },
            _ => Metric::MemoryAvailable,
        };
        (m, op, v)
    });
    let pids = (arb_group(), op.clone(), any::<u64>()).prop_map(|(g, op, n)| {
        (
            Metric::PidsCurrent { group: sp(g) },
            op,
            Threshold::Count(n),
        )
    });
    let events = (
        arb_group(),
        prop::sample::select(MemEvent::ALL),
        prop_oneof![Just(CmpOp::Gt), Just(CmpOp::Ge)],
        any::<u64>(),
        prop::option::of(1_000u64..=3_600_000),
    )
        .prop_map(|(g, event, op, count, window_ms)| {
            (
                Metric::MemoryEvent {
                    group: sp(g),
                    event,
                },
                op,
                Threshold::Events {
                    count,
                    window: window_ms.map(ms),
                },
            )
        });
    let populated = (arb_group(), op.clone(), 0u64..=1)
        .prop_map(|(g, op, n)| (Metric::Populated { group: sp(g) }, op, Threshold::Count(n)));
    let thermal = (
        "[a-z0-9_-]{1,10}(\\.[a-z0-9_-]{1,5})?",
        op,
        -273_150i64..=1_000_000,
    )
        .prop_map(|(zone, op, md)| {
            (
                Metric::ThermalTemp { zone: sp(zone) },
                op,
                Threshold::Temperature(Temperature { millidegrees: md }),
            )
        });
    prop_oneof![psi_avg, psi_stall, bytes, pids, events, populated, thermal].prop_map(
        |(metric, op, value)| {
            ExprKind::Compare(Compare {
                metric,
                op,
                value,
                value_span: Span::default(),
            })
        },
    )
}

fn arb_expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        4 => arb_compare(),
        1 => "[a-z0-9_*?/:-]{1,15}".prop_map(ExprKind::Running),
        1 => "[a-z ]{1,10}".prop_map(ExprKind::Running),
        1 => arb_group().prop_map(|g| ExprKind::Exists(sp(g))),
    ]
    .prop_map(|kind| Expr {
        kind,
        span: Span::default(),
    });
    leaf.prop_recursive(6, 48, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone())
                .prop_map(|(l, r)| ExprKind::Or(Box::new(l), Box::new(r))),
            (inner.clone(), inner.clone())
                .prop_map(|(l, r)| ExprKind::And(Box::new(l), Box::new(r))),
            inner.prop_map(|e| ExprKind::Not(Box::new(e))),
        ]
        .prop_map(|kind| Expr {
            kind,
            span: Span::default(),
        })
    })
}

proptest! {
    #[test]
    fn print_parse_roundtrip(e in arb_expr()) {
        let text = e.to_string();
        let parsed = parse_expr(&text);
        prop_assert!(parsed.is_ok(), "{}: {:?}", text, parsed);
        prop_assert_eq!(parsed.ok(), Some(e), "{}", text);
    }

    #[test]
    fn spans_stay_in_bounds(e in arb_expr()) {
        let text = e.to_string();
        if let Ok(parsed) = parse_expr(&text) {
            let len = text.chars().count();
            prop_assert!(parsed.span.end <= len);
            for (g, span) in referenced_groups(&parsed) {
                let at: String = text.chars().skip(span.start).take(span.end - span.start).collect();
                prop_assert_eq!(at, g);
            }
        }
    }

    #[test]
    fn parse_expr_never_panics(s in "\\PC{0,60}") {
        let _ = parse_expr(&s);
    }

    #[test]
    fn parse_expr_never_panics_on_near_misses(
        parts in prop::collection::vec(prop_oneof![
            Just("g.cpu.some.avg10"), Just("g.memory.some"), Just("thermal.x.temp"),
            Just(">"), Just(">="), Just("=="), Just("10%"), Just("1s/2s"), Just("85C"),
            Just("g.memory.events.high"), Just("5/10s"), Just("5/"), Just("/"),
            Just("and"), Just("or"), Just("not"), Just("("), Just(")"), Just("running("),
            Just("exists("), Just("'"), Just("4G"), Just("."), Just("-"),
        ], 0..12)
    ) {
        let src = parts.join(" ");
        let _ = parse_expr(&src);
        let _ = parse_expr(&parts.concat());
    }

    #[test]
    fn parse_action_never_panics(s in "\\PC{0,60}") {
        let _ = parse_action(&s);
    }

    #[test]
    fn action_roundtrip(
        group in arb_group().prop_filter("reserved", |g| !["cpufreq", "sysctl", "zram"].contains(&g.as_str())),
        bytes in 1u64..(1 << 40),
        weight in 1u64..=10_000,
        hook in arb_group(),
        which in 0u8..6,
    ) {
        let knob = |k: GroupKnob| Knob::Group { group: group.clone(), knob: k };
        let action = match which {
            0 => Action::Set { knob: knob(GroupKnob::MemoryHigh), value: KnobValue::Size(Size::Bytes(bytes)) },
            1 => Action::Raise {
                knob: knob(GroupKnob::MemoryMax),
                by: KnobValue::Size(Size::Bytes(bytes)),
                limit: KnobValue::Size(Size::Max),
            },
            2 => Action::Lower {
                knob: knob(GroupKnob::IoWeight),
                by: KnobValue::Weight(weight),
                limit: KnobValue::Weight(1),
            },
            3 => Action::Set {
                knob: knob(GroupKnob::CpuMax),
                value: KnobValue::CpuMax(crate::knobs::CpuMax::Quota { quota_us: 1_000 + bytes % 100_000, period_us: 100_000 }),
            },
            4 => Action::Hook(hook),
            _ => Action::CompactMemory,
        };
        prop_assert_eq!(parse_action(&action.to_string()), Ok(action));
    }
}

/// The board's hardware in conditions.
#[test]
fn hardware_metrics_and_throttled_parse_and_print_back() {
    for text in [
        "throttled(policy7)",
        "thermal.cpu-1-3.trip.0 < 95C",
        "cooling.cpufreq-cpu7.state > 0",
        "cpufreq.policy7.limit < 1.8GHz",
        "cpufreq.policy4.cur >= 1200MHz",
        "throttled(policy7) and not cpufreq.policy7.limit < 2GHz",
    ] {
        let e = parse_expr(text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        assert_eq!(
            parse_expr(&e.to_string()).unwrap().to_string(),
            e.to_string(),
            "{text}"
        );
    }
    for bad in [
        "throttled(cpu7)",
        "throttled()",
        "cpufreq.cpu7.limit < 1GHz",
        "cpufreq.policy7.limit > 95C",
        "cooling.x.state > fast",
        "thermal.z.trip.x < 1C",
    ] {
        assert!(parse_expr(bad).is_err(), "{bad}");
    }
}

#[test]
fn leaves_are_in_source_order_through_and_or_not() {
    let e =
        parse_expr("running(a) or not (exists(g) and running(b)) or throttled(policy0)").unwrap();
    let shown: Vec<String> = e.leaves().iter().map(|l| l.to_string()).collect();
    assert_eq!(
        shown,
        [
            "running(a)",
            "exists(g)",
            "running(b)",
            "throttled(policy0)"
        ]
    );
}

#[test]
fn leaves_of_a_deep_hand_built_tree_do_not_recurse() {
    let mut e = parse_expr("running(a)").unwrap();
    for _ in 0..100_000 {
        e = Expr {
            span: e.span,
            kind: ExprKind::Not(Box::new(e)),
        };
    }
    assert_eq!(e.leaves().len(), 1);
    // The tree's own drop recurses; leak it rather than overflow here.
    std::mem::forget(e);
}
