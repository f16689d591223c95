#!/usr/bin/env python3
"""An independent client of io.cgwarden.Daemon: the PyPI `varlink` package.

Usage: client_test.py SOCKET [bad-value]

With `bad-value`, only the check that a boost of a malformed knob value
answers InvalidRequest (the IDL: "A parameter is malformed (unknown knob,
bad duration or value)"); the daemon answers Refused today, so that check
runs from an ignored test until it is fixed.

Run by tests/control_varlink.rs against a daemon on a fake tree. The proxy
is built from the interface description the daemon sends
(GetInterfaceDescription), so this also checks that the IDL parses in a
parser we did not write, and every reply is filtered through that IDL's
types by the package (a reply of the wrong shape raises). Every method is
called; the error replies must carry the interface's error names with a
`message` parameter. Exits 0 when everything held, 1 with the reason.
"""

import sys
import threading
import traceback

try:
    import varlink
except ImportError:
    sys.stderr.write(
        "the Python `varlink` package is missing: python3 -m pip install varlink\n"
    )
    sys.exit(3)

IFACE = "io.cgwarden.Daemon"
KNOB = "vision.cpu.weight"
MIN = "cpufreq.policy4.min"


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what)


def expect_error(name, call, *args, **kwargs):
    """`call` must answer the varlink error `name` with a `message`."""
    try:
        r = call(*args, **kwargs)
    except varlink.VarlinkError as e:
        check(e.error() == name, "error %s (got %s)" % (name, e.error()))
        params = e.parameters() or {}
        msg = params.get("message")
        check(isinstance(msg, str) and msg != "", "%s has a message: %r" % (name, msg))
        return msg
    raise AssertionError("expected the error %s, got the reply %r" % (name, r))


def main(sock):
    address = "unix:" + sock
    with varlink.Client(address=address) as client:
        # --- org.varlink.service ---------------------------------------
        with client.open("org.varlink.service") as svc:
            info = svc.GetInfo()
            print("GetInfo:", info)
            check(IFACE in info["interfaces"], "GetInfo lists %s" % IFACE)
            check(info["product"] != "", "GetInfo names the product")
            desc = svc.GetInterfaceDescription(IFACE)["description"]
            check(desc.startswith("interface " + IFACE), "GetInterfaceDescription")

        # The description parses in this package's scanner.
        iface = varlink.scanner.Interface(desc)
        methods = sorted(
            n for n, m in iface.members.items() if isinstance(m, varlink.scanner._Method)
        )
        print("methods:", methods)
        for m in [
            "Boost",
            "Extend",
            "ListClaims",
            "Release",
            "Reload",
            "Status",
            "Subscribe",
            "Verify",
            "Health",
        ]:
            check(m in methods, "the IDL declares %s" % m)

        with client.open(IFACE) as d:
            # --- Status ---------------------------------------------------
            st = d.Status()
            check(st["product"] == "control-test", "Status: product")
            check(len(st["policy"]["hash"]) == 64, "Status: policy hash")
            check(st["daemon"]["pid"] > 0, "Status: daemon pid")
            names = sorted(g["name"] for g in st["groups"])
            check("vision" in names and "inference" in names, "Status: groups %s" % names)
            check(
                any(r["name"] == "oom-seen" for r in st["rules"]), "Status: rule oom-seen"
            )
            check(st["claims"] == [], "Status: no claims yet")

            # --- Boost ----------------------------------------------------
            b = d.Boost(
                knobs={KNOB: "500", MIN: "1.8GHz"},
                duration="10m",
                reason="pypi varlink client",
            )
            print("Boost:", b)
            handle = b["handle"]
            check(isinstance(handle, int) and handle > 0, "Boost: a handle")
            check(b.get("expires_at"), "Boost: expires_at")
            applied = {a["knob"]: a["value"] for a in b["applied"]}
            check(set(applied) == {KNOB, MIN}, "Boost: both knobs applied %s" % applied)
            check(b["rejected"] == [], "Boost: nothing rejected")

            # --- ListClaims -----------------------------------------------
            claims = d.ListClaims()["claims"]
            print("ListClaims:", claims)
            mine = [c for c in claims if c.get("handle") == handle]
            check(len(mine) == 2, "ListClaims: the boost's two claims")
            for c in mine:
                check(c["uid"] == 0, "ListClaims: uid 0 on %s" % c["knob"])
                check(c["reason"] == "pypi varlink client", "ListClaims: reason")
                check(c["owner"] == "boost %d" % handle, "ListClaims: owner")

            # --- Extend ---------------------------------------------------
            x = d.Extend(handle=handle, duration="20m")
            print("Extend:", x)
            check(x.get("expires_at") and x["expires_at"] > b["expires_at"], "Extend: later")

            # --- Verify ---------------------------------------------------
            v = d.Verify()
            print("Verify: drift=%s, %d knobs" % (v["drift"], len(v["knobs"])))
            check(isinstance(v["drift"], bool), "Verify: drift is a bool")
            check(len(v["knobs"]) > 0, "Verify: knobs checked")

            # --- Health ---------------------------------------------------
            h = d.Health()
            print("Health:", h)
            check(isinstance(h["healthy"], bool), "Health: healthy is a bool")
            check(h["hash"] == st["policy"]["hash"], "Health: the hash in force")
            check(isinstance(h["reasons"], list), "Health: reasons")

            # --- Reload (dry run): that it answers, not what ---------------
            r = d.Reload(dry_run=True)
            print("Reload:", r)
            check(isinstance(r["ok"], bool), "Reload: answers ok")
            check(isinstance(r["hash"], str), "Reload: answers hash")

            # --- Release --------------------------------------------------
            rel = d.Release(handle=handle)
            check(not rel, "Release: an empty reply")
            claims = d.ListClaims()["claims"]
            check(
                not any(c.get("handle") == handle for c in claims),
                "ListClaims: the boost is gone",
            )

            # --- errors ---------------------------------------------------
            expect_error(IFACE + ".NoSuchHandle", d.Release, handle=handle)
            expect_error(IFACE + ".NoSuchHandle", d.Extend, handle=999999, duration="1m")
            expect_error(
                IFACE + ".InvalidRequest", d.Boost, knobs={KNOB: "100"}, duration="banana"
            )
            expect_error(IFACE + ".InvalidRequest", d.Boost, knobs={})
            # A malformed value next to a good one: the good one is held,
            # the other is listed with why.
            p = d.Boost(knobs={KNOB: "300", MIN: "banana"}, duration="1m")
            check([a["knob"] for a in p["applied"]] == [KNOB], "partial Boost: applied")
            check(
                [r["knob"] for r in p["rejected"]] == [MIN] and "banana" in p["rejected"][0]["why"],
                "partial Boost: rejected with why %s" % p["rejected"],
            )
            d.Release(handle=p["handle"])
            # The connection still serves after error replies.
            check(d.ListClaims()["claims"] == [], "the connection serves after errors")

        subscribe(client)


def bad_value(client):
    """A boost whose only knob has a malformed value."""
    with client.open(IFACE) as d:
        msg = expect_error(
            IFACE + ".InvalidRequest",
            d.Boost,
            knobs={KNOB: "banana"},
            duration="1m",
        )
        check("banana" in msg, "the message names the bad value: %r" % msg)


def subscribe(client):
    """Subscribe with `more`; a boost from another connection shows up."""
    with client.open(IFACE) as sub:
        sub._connection.settimeout(10)
        events = sub.Subscribe(_more=True)
        first = next(events)["event"]
        print("event:", first)
        check(first["kind"] == "subscribed", "Subscribe: first event `subscribed`")

        granted = {}

        def boost():
            with client.open(IFACE) as other:
                granted.update(other.Boost(knobs={KNOB: "700"}, duration="1m", reason="ev"))

        t = threading.Thread(target=boost)
        t.start()
        t.join(10)
        check("handle" in granted, "Boost from another connection")
        h = granted["handle"]
        kinds = []
        saw_grant = saw_write = False
        for m in events:
            e = m["event"]
            print("event:", e)
            kinds.append(e["kind"])
            if e["kind"] == "claim_granted" and e.get("handle") == h:
                check(e.get("knob") == KNOB and e.get("new") == "700", "claim_granted event")
                saw_grant = True
            if e["kind"] == "write" and e.get("knob") == KNOB and e.get("new") == "700":
                saw_write = True
            if saw_grant and saw_write:
                break
        check(saw_grant and saw_write, "Subscribe: claim_granted and write (%s)" % kinds)
        with client.open(IFACE) as other:
            other.Release(handle=h)
        for m in events:
            e = m["event"]
            print("event:", e)
            if e["kind"] == "claim_released" and e.get("handle") == h:
                print("ok: claim_released event")
                break
        sub.close()


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or sys.argv[2:] not in ([], ["bad-value"]):
        sys.stderr.write("usage: client_test.py SOCKET [bad-value]\n")
        sys.exit(2)
    try:
        if sys.argv[2:] == ["bad-value"]:
            with varlink.Client(address="unix:" + sys.argv[1]) as c:
                bad_value(c)
        else:
            main(sys.argv[1])
    except Exception:
        traceback.print_exc()
        sys.exit(1)
    print("varlink client: all checks passed")
