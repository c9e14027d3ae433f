//! The broker under test as a process: started by the bench (`--spawn-broker`) or named by pid
//! (`--broker-pid`), and probed through `/proc/<pid>` for CPU time and memory. Reading `/proc`
//! costs the broker nothing, unlike asking it over HTTP, and works the same for every peer
//! broker.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::proto::Target;

/// How long a spawned broker gets to start listening before the run is abandoned.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// How long a spawned broker gets to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The broker counts as quiet once it used less than this share of a core over one
/// `SETTLE_PERIOD`.
const QUIET_SHARE: f64 = 0.10;

/// How often the broker's CPU is read while waiting for it to be quiet: 20 clock ticks, so the
/// quiet threshold is two ticks.
const SETTLE_PERIOD: Duration = Duration::from_millis(200);

/// Longest wait for a quiet broker; a broker busy on its own (a peer's housekeeping) must not
/// stall a run.
const SETTLE_MAX: Duration = Duration::from_secs(5);

/// The broker process whose resources the report includes.
pub struct Broker {
    probe: Probe,
    /// Present when the bench started the broker, so it also stops it.
    child: Option<Child>,
}

/// What it takes to read a process's figures: cheap to copy into a sampling task.
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    /// The process id.
    pub pid: u32,
    ticks_per_second: f64,
}

impl Probe {
    /// A probe for `pid`.
    pub fn new(pid: u32) -> Result<Self> {
        Ok(Probe { pid, ticks_per_second: clock_ticks_per_second()? })
    }

    /// Reads CPU time and memory now.
    pub fn sample(&self) -> Result<ProcSample> {
        ProcSample::read(&self.pid.to_string(), self.ticks_per_second)
    }

    /// Waits until the process used less than `QUIET_SHARE` of a core over a `SETTLE_PERIOD`,
    /// or `SETTLE_MAX` passed: work the broker still does for what came before (a backlog, the
    /// set-up of thousands of connections) is then not billed to what is measured next, and
    /// its memory is read once that work is done. The wait polls `/proc`, the only way to see
    /// a peer broker's work.
    pub async fn settle(&self) {
        let deadline = tokio::time::Instant::now() + SETTLE_MAX;
        let Ok(mut last) = self.sample() else { return };
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(SETTLE_PERIOD).await;
            let Ok(now) = self.sample() else { return };
            if now.cpu_secs - last.cpu_secs < SETTLE_PERIOD.as_secs_f64() * QUIET_SHARE {
                return;
            }
            last = now;
        }
    }

    /// The bench's own figures, to show when the load generator rather than the broker was
    /// the bottleneck.
    pub fn sample_self(&self) -> Result<ProcSample> {
        ProcSample::read("self", self.ticks_per_second)
    }
}

impl Broker {
    /// Watches an already running broker.
    pub fn attach(pid: u32) -> Result<Self> {
        let broker = Broker { probe: Probe::new(pid)?, child: None };
        broker.probe.sample().with_context(|| format!("broker pid {pid} cannot be read in /proc"))?;
        Ok(broker)
    }

    /// Starts `command` (split on whitespace; no shell quoting) and waits until `target`
    /// answers (accepts TCP connections; an MQTT-SN gateway answers SEARCHGW), so the first
    /// client does not race the broker's bind.
    pub async fn spawn(command: &str, target: &Target) -> Result<Self> {
        let mut words = command.split_whitespace();
        let program = words.next().context("--spawn-broker is empty")?;
        let child = Command::new(program)
            .args(words)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start broker `{command}`"))?;
        let mut broker = Broker { probe: Probe::new(child.id())?, child: Some(child) };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = broker.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                bail!("broker `{command}` exited during start-up: {status}");
            }
            if target.answers().await {
                return Ok(broker);
            }
            if Instant::now() > deadline {
                bail!("broker `{command}` did not answer on {} within {START_TIMEOUT:?}", target.addr);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The probe reading this broker's figures.
    pub fn probe(&self) -> Probe {
        self.probe
    }

    /// Stops a broker the bench started (SIGTERM, then SIGKILL after a grace period); a broker
    /// given by pid is left running.
    pub async fn stop(mut self) {
        let Some(mut child) = self.child.take() else { return };
        // std only offers SIGKILL; SIGTERM lets the broker shut down the way users stop it.
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        // A run that fails half-way must not leave a broker holding the port.
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// CPU time and memory of one process at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProcSample {
    /// User plus system CPU time, in seconds.
    pub cpu_secs: f64,
    /// Resident set size (`VmRSS`), in KiB.
    pub rss_kib: u64,
    /// Peak resident set size (`VmHWM`), in KiB.
    pub hwm_kib: u64,
}

impl ProcSample {
    /// Reads `/proc/<pid>/stat` and `/proc/<pid>/status`; `pid` may be `self`.
    pub fn read(pid: &str, ticks_per_second: f64) -> Result<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .with_context(|| format!("reading /proc/{pid}/stat"))?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .with_context(|| format!("reading /proc/{pid}/status"))?;
        let ticks = parse_cpu_ticks(&stat).with_context(|| format!("parsing /proc/{pid}/stat"))?;
        Ok(ProcSample {
            cpu_secs: ticks as f64 / ticks_per_second,
            rss_kib: status_kib(&status, "VmRSS:").unwrap_or(0),
            hwm_kib: status_kib(&status, "VmHWM:").unwrap_or(0),
        })
    }
}

/// utime + stime in clock ticks. The command name (field 2) is in parentheses and may contain
/// spaces or parentheses itself, so fields are counted from the last `)` (proc(5)).
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_comm.split_whitespace();
    // After the name come state (field 3) … utime (field 14) and stime (field 15).
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// A `Name:   1234 kB` line of /proc/<pid>/status, in KiB.
fn status_kib(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// The CPUs process `pid` (or `self`) may run on: `Cpus_allowed_list` of /proc/<pid>/status,
/// which is its sched_getaffinity mask, as `taskset` set it. The bench compares its own with
/// the broker's to say whether the two competed for cores.
pub fn cpus_allowed(pid: &str) -> Result<Vec<u32>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .with_context(|| format!("no Cpus_allowed_list in /proc/{pid}/status"))?;
    parse_cpu_list(list.trim()).with_context(|| format!("bad Cpus_allowed_list {list:?} for {pid}"))
}

/// A kernel CPU list (`0-3,8,10-11`) as CPU numbers.
fn parse_cpu_list(list: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in list.split(',') {
        let (first, last) = part.split_once('-').unwrap_or((part, part));
        let (first, last): (u32, u32) = (first.parse().ok()?, last.parse().ok()?);
        cpus.extend(first..=last);
    }
    Some(cpus)
}

/// `getconf CLK_TCK`: the unit of the times in /proc/<pid>/stat. It is 100 on every Linux we
/// know of, but asking costs one process start per run and avoids a libc dependency.
pub fn clock_ticks_per_second() -> Result<f64> {
    let out = Command::new("getconf").arg("CLK_TCK").output().context("running getconf CLK_TCK")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let ticks: f64 = text.trim().parse().with_context(|| format!("getconf CLK_TCK said {text:?}"))?;
    if ticks <= 0.0 {
        bail!("getconf CLK_TCK said {ticks}");
    }
    Ok(ticks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_name() {
        let stat = "4242 (we ird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 1 0";
        assert_eq!(parse_cpu_ticks(stat), Some(325));
        assert_eq!(parse_cpu_ticks("garbage"), None);
    }

    #[test]
    fn status_values_are_read_in_kib() {
        let status = "Name:\tmosquitto\nVmHWM:\t    9000 kB\nVmRSS:\t    8123 kB\n";
        assert_eq!(status_kib(status, "VmRSS:"), Some(8123));
        assert_eq!(status_kib(status, "VmHWM:"), Some(9000));
        assert_eq!(status_kib(status, "VmSwap:"), None);
    }

    #[test]
    fn cpu_lists_expand_ranges() {
        assert_eq!(parse_cpu_list("0-3,8,10-11"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse_cpu_list("1"), Some(vec![1]));
        assert_eq!(parse_cpu_list("x"), None);
        assert!(!cpus_allowed("self").unwrap().is_empty());
    }

    #[test]
    fn own_process_can_be_sampled() {
        let s = ProcSample::read("self", clock_ticks_per_second().unwrap()).unwrap();
        assert!(s.rss_kib > 0 && s.hwm_kib >= s.rss_kib);
    }
}
