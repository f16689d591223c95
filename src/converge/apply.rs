//! Carrying out one planned step (`apply`): the write, mkdir, move, zram and
//! swap actions behind [`Converger::apply_journalled`], each journalled first.

use super::journal::{Entry, Journal};
use super::{check_partition, sched_spec, tuning, Converger, Step, StepError};
use crate::kernel::wait::page_size;
use crate::kernel::{procfs, sched, zram};
use crate::knobs::normalize::{self, Form};
use std::path::PathBuf;

impl Converger<'_> {
    pub(super) fn apply_step(
        &self,
        step: &Step,
        journal: &mut Journal,
        created: &mut Vec<PathBuf>,
    ) -> Result<bool, StepError> {
        match step {
            Step::Mkdir { path } => {
                if self.root.is_dir(path) {
                    return Ok(false);
                }
                journal
                    .record(Entry::Mkdir { path: path.clone() })
                    .map_err(StepError::Journal)?;
                let rel = path
                    .strip_prefix(self.cg.base())
                    .map(|p| p.to_string_lossy().into_owned())
                    .map_err(|_| {
                        crate::kernel::Error::other(path.clone(), "not below the cgroup root")
                    })?;
                self.cg.mkdir(&rel)?;
                created.push(path.clone());
                Ok(true)
            }
            Step::Write {
                path, value, form, ..
            } => {
                let current = if zram::device_of(path).is_some() {
                    // zram's write-only mem_limit is read through mm_stat.
                    zram::current(&self.root, path)?
                } else if self.root.exists(path) {
                    Some(self.root.read(path)?)
                } else {
                    None
                };
                if let Some(cur) = &current {
                    if normalize::same(*form, cur, value, page_size()) {
                        return Ok(false);
                    }
                }
                let inside_created = created.iter().any(|d| path.starts_with(d));
                let was_invalid = *form == Form::Partition
                    && current
                        .as_deref()
                        .and_then(normalize::partition_invalid)
                        .is_some();
                if !inside_created {
                    match current {
                        Some(content) => journal
                            .record(Entry::File {
                                path: path.clone(),
                                content,
                            })
                            .map_err(StepError::Journal)?,
                        None => journal
                            .record(Entry::Absent { path: path.clone() })
                            .map_err(StepError::Journal)?,
                    }
                }
                if was_invalid && value.trim() != "member" {
                    // 6.1 keeps an invalid partition invalid when its own type is
                    // written again, even once the conflict is gone; only a pass
                    // through `member` makes the kernel check it anew.
                    self.root.write(path, "member")?;
                }
                self.root.write(path, value)?;
                if *form == Form::Partition {
                    check_partition(&self.root, path, value)?;
                }
                Ok(true)
            }
            Step::Trigger { path, value, saves } => {
                // Never read the trigger itself (EACCES: mode 0200); journal
                // what it destroys, then fire it.
                for p in saves {
                    if let Some(content) = zram::current(&self.root, p)? {
                        journal
                            .record(Entry::File {
                                path: p.clone(),
                                content,
                            })
                            .map_err(StepError::Journal)?;
                    }
                }
                self.root.write(path, value)?;
                Ok(true)
            }
            Step::Modprobe { module } => {
                zram::modprobe(module)?;
                if module == zram::MODULE && !zram::module_loaded(&self.root) {
                    return Err(StepError::Kernel(crate::kernel::Error::other(
                        zram::CONTROL_DIR,
                        format!(
                            "`modprobe {module}` succeeded but {} did not appear",
                            zram::CONTROL_DIR
                        ),
                    )));
                }
                Ok(true)
            }
            Step::ZramHotAdd { device } => {
                if zram::exists(&self.root, device) {
                    // Created meanwhile (by modprobe with num_devices > 1).
                    return Ok(false);
                }
                let got = zram::hot_add(&self.root)?;
                journal
                    .record(Entry::ZramHotAdd {
                        device: got.clone(),
                    })
                    .map_err(StepError::Journal)?;
                if &got != device {
                    return Err(StepError::Kernel(crate::kernel::Error::other(
                        zram::HOT_ADD,
                        format!("hot_add created {got}, not {device}; name the device {got} in the policy"),
                    )));
                }
                Ok(true)
            }
            Step::Mkswap { device, size } => {
                journal
                    .record(Entry::ZramInit {
                        device: device.clone(),
                    })
                    .map_err(StepError::Journal)?;
                zram::write_swap_header(&zram::dev_node(device), *size)?;
                Ok(true)
            }
            Step::Swapon { device, priority } => {
                let node = zram::dev_node(device);
                journal
                    .record(Entry::Swapon { path: node.clone() })
                    .map_err(StepError::Journal)?;
                zram::swapon(&node, *priority)?;
                Ok(true)
            }
            Step::Move { pid, procs, .. } => {
                let rel = procs
                    .parent()
                    .and_then(|d| d.strip_prefix(self.cg.base()).ok())
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default();
                self.cg.move_pid(&rel, *pid)?;
                Ok(true)
            }
            Step::Kthread {
                pid,
                comm,
                sched: s,
                cpus,
            } => {
                use crate::kernel::irq;
                if !irq::is_kthread(&self.root, *pid, comm) {
                    return Ok(false);
                }
                let sched_now =
                    irq::sched_text(&self.root, *pid)?.unwrap_or_else(|| "other 0".into());
                let cpus_now = irq::affinity(&self.root, *pid)?.unwrap_or_default();
                journal
                    .record(Entry::Kthread {
                        pid: *pid,
                        comm: comm.clone(),
                        sched: sched_now,
                        cpus: cpus_now,
                    })
                    .map_err(StepError::Journal)?;
                if let Some(s) = s {
                    sched::apply(*pid, &sched_spec(s))?;
                }
                if let Some(c) = cpus {
                    irq::set_affinity(&self.root, *pid, &c.iter().collect::<Vec<_>>())?;
                }
                Ok(true)
            }
            Step::Sched { pid, sched: s, .. } => {
                let spec = sched_spec(s);
                let mut any = false;
                for tid in procfs::threads(&self.root, *pid) {
                    match sched::apply(tid, &spec) {
                        Ok(()) => any = true,
                        Err(e) if e.errno() == Some(libc::ESRCH) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                Ok(any)
            }
            Step::Task(ch) => {
                let t = tuning::Tuner::new(self.root.clone(), self.policy);
                // The original first, as for every other write.
                t.journal(std::slice::from_ref(ch)).map_err(|e| {
                    StepError::Journal(crate::kernel::Error::other(
                        tuning::journal::path(&self.policy.settings.state_dir),
                        e,
                    ))
                })?;
                t.make(ch)?;
                Ok(true)
            }
        }
    }
}
