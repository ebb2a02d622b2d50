//! The daemon's loop with RDMA netlink served by a fake kernel, for idle measurements on a
//! machine without RDMA (scripts/measure-idle.sh runs it).
//!
//! A child process plays the kernel on two `socketpair`s (requests, device events) with the
//! real 6.12 capture of the lab host (crates/iser-guard-core/tests/fixtures/nldev/k612/nldev-1-loggedin: rxe_ini and
//! rxe_tgt) whose QP tables are padded to `--qps` RC QPs per device; the parent runs exactly
//! what `iser-guard daemon` runs (`Deps::real` for the configuration given, the same loop),
//! with only the topology source's sockets swapped for the fake kernel's. Measuring the
//! parent's pid therefore measures the daemon, not the fake kernel.
//!
//! Usage: `idle_daemon --config FILE [--qps N] [--runtime current|multi]` (root or not; the
//! configuration decides the kernel log, control socket, iscsiadm and state paths).
//! `--runtime` picks the tokio runtime the loop runs on: `current` (one thread, what
//! `iser-guard daemon` uses) or `multi` (two workers, what it used before).

#[path = "../tests/support/fake_kernel.rs"]
mod fake_kernel;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use fake_kernel::Replay;
use iser_guard::core::nldev::{
    encode, Nested, NldevAttribute as A, NldevCommand, NldevMessage, NldevNetlinkMessage,
};
use iser_guard::daemon::run::{run, Deps, Mode, Settings};
use iser_guard::daemon::topology::HostTopology;

const MOMENT: &str = "k612/nldev-1-loggedin";

/// A RES_QP_GET reply part for device `dev` with `n` RC QPs in RTS numbered from `first`, in
/// the kernel's entry layout (as tests/nldev_socket.rs builds them).
fn qp_part(dev: u32, name: &str, first: u32, n: u32) -> Vec<u8> {
    use netlink_packet_core::{NetlinkHeader, NetlinkPayload};
    let entries = (first..first + n)
        .map(|lqpn| {
            A::ResQpEntry(Nested::new(vec![
                A::PortIndex(1),
                A::ResLqpn(lqpn),
                A::ResKernName("rdma_cm".into()),
                A::ResSqPsn(lqpn * 7),
                A::ResType(2),
                A::ResState(3),
            ]))
        })
        .collect();
    let msg = NldevMessage::new(
        NldevCommand::ResQpGet,
        vec![
            A::DevIndex(dev),
            A::DevName(name.into()),
            A::ResQp(Nested::new(entries)),
        ],
    );
    let mut header = NetlinkHeader::default();
    header.flags = 2; // NLM_F_MULTI
    encode(&NldevNetlinkMessage::new(
        header,
        NetlinkPayload::InnerMessage(msg),
    ))
    .unwrap_or_default()
}

/// The lab host with `qps` extra RC QPs on each device, in parts of at most 200 entries (the
/// kernel splits big tables across messages too).
fn replay(qps: u32) -> Replay {
    let mut r = Replay::default().moment(MOMENT);
    for (file, dev, name) in [
        ("08-res-qp-get-dump-dev0.hex", 0, "rxe_ini"),
        ("09-res-qp-get-dump-dev1.hex", 1, "rxe_tgt"),
    ] {
        let rel = format!("{MOMENT}/{file}");
        r = r.edit(&rel, |replies| {
            let mut first = 100;
            let mut left = qps;
            let mut parts = Vec::new();
            while left > 0 {
                let n = left.min(200);
                parts.push(qp_part(dev, name, first, n));
                first += n;
                left -= n;
            }
            // Before the captured part (which holds the GSI QP) and its DONE.
            for (i, p) in parts.into_iter().enumerate() {
                replies.insert(i, p);
            }
        });
    }
    r
}

/// On each SIGUSR1, prints the whole process's context switches and CPU time as
/// `getrusage(RUSAGE_SELF)` counts them: threads that already exited (the blocking pool's,
/// the iscsiadm pipe readers) included, which /proc/PID/task no longer shows.
async fn report_rusage_on_sigusr1() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut usr1) = signal(SignalKind::user_defined1()) else {
        return;
    };
    while usr1.recv().await.is_some() {
        // SAFETY: getrusage writes one rusage struct to the valid pointer we pass.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } == 0 {
            let us = |t: libc::timeval| t.tv_sec * 1_000_000 + t.tv_usec;
            eprintln!(
                "rusage: csw={} cpu_us={}",
                ru.ru_nvcsw + ru.ru_nivcsw,
                us(ru.ru_utime) + us(ru.ru_stime)
            );
        }
    }
}

struct Args {
    config: PathBuf,
    qps: u32,
    multi: bool,
}

fn args() -> Result<Args, String> {
    let mut config = None;
    let mut qps = 300;
    let mut multi = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--config" => config = it.next().map(PathBuf::from),
            "--qps" => {
                qps = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--qps takes a number")?
            }
            "--runtime" => match it.next().as_deref() {
                Some("current") => multi = false,
                Some("multi") => multi = true,
                _ => return Err("--runtime takes current or multi".into()),
            },
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(Args {
        config: config.ok_or("--config FILE is required")?,
        qps,
        multi,
    })
}

fn main() -> ExitCode {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("idle_daemon: {e}\nusage: idle_daemon --config FILE [--qps N] [--runtime current|multi]");
            return ExitCode::from(64);
        }
    };
    let (requests, kernel) = fake_kernel::pair();
    let (events, events_kernel) = fake_kernel::pair();
    let replay = replay(args.qps);
    // SAFETY: no thread has been started yet (the runtime is built after the fork), so the
    // child is a copy of a single-threaded process and may run ordinary code.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            drop((requests, events));
            // The event socket stays open and silent (an idle host sends no device events).
            let _events_kernel = events_kernel;
            kernel.serve(replay);
            return ExitCode::SUCCESS;
        }
        Ok(nix::unistd::ForkResult::Parent { .. }) => drop((kernel, events_kernel)),
        Err(e) => {
            eprintln!("idle_daemon: fork: {e}");
            return ExitCode::from(71);
        }
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let config = match iser_guard::config::load_or_default(Some(&args.config)) {
        Ok((c, _)) => c,
        Err(e) => {
            eprintln!("idle_daemon: {e}");
            return ExitCode::from(78);
        }
    };
    let rt = if args.multi {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    } else {
        // As src/cli/daemon.rs builds it.
        tokio::runtime::Builder::new_current_thread()
            .thread_keep_alive(Duration::from_secs(300))
            .enable_all()
            .build()
    };
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("idle_daemon: runtime: {e}");
            return ExitCode::from(71);
        }
    };
    let settings = Settings {
        config: config.clone(),
        config_path: Some(args.config.clone()),
        force_dry_run: true,
        take_lock: true,
        automatic_actions: true,
        read_only: false,
    };
    let code = rt.block_on(async move {
        tokio::spawn(report_rusage_on_sigusr1());
        let mut deps = Deps::real(&config, true)?;
        deps.topology = Box::new(HostTopology {
            sysfs_root: config.paths.sysfs_root.clone(),
            interval: config.poll.netlink,
            netlink: fake_kernel::injected_netlink(requests, events),
            metrics: iser_guard::metrics::Metrics::disabled(),
            mountinfo: None,
        });
        run(settings, deps, Mode::Daemon).await
    });
    rt.shutdown_timeout(Duration::from_millis(200));
    match code {
        Ok(c) => ExitCode::from(c),
        Err(e) => {
            eprintln!("idle_daemon: {e}");
            ExitCode::from(1)
        }
    }
}
