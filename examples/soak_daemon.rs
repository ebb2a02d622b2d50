//! The daemon's loop with RDMA netlink served by a *misbehaving* fake kernel, for the soak
//! test (scripts/soak.sh runs it; docs/history/trust.md has its figures).
//!
//! As examples/idle_daemon.rs: a child process plays the kernel on two `socketpair`s with
//! the real 6.12 captures of the lab host (rxe_ini on ini0, rxe_tgt on tgt0); the parent runs
//! exactly what `iser-guard daemon` runs (`Deps::real` for the configuration given, the same
//! loop, the real /dev/kmsg, iscsiadm, syslog and control socket of the configuration), with
//! only the topology source's sockets swapped for the fake kernel's and the route lookup
//! answering `ini0` (the session's portal is a loopback listener, which no real route puts on
//! an RDMA netdev).
//!
//! The fake kernel answers from a *world* directory the soak shares with its stubs:
//! - `WORLD/device`: `absent` serves the capture taken after `rdma link delete rxe_ini`
//!   (nldev-2-inideleted, and -ENODEV for requests naming rxe_ini), anything else the
//!   logged-in capture;
//! - `WORLD/gsi`: `ERR` puts rxe_ini's GSI QP (QP 1) in ERR in the QP dump (IB_QPS_ERR = 6),
//!   as the field failure leaves it;
//! - `WORLD/nl-chaos`: a percentage (default 5): that share of requests gets an error reply
//!   (-EBUSY, -ENOMEM or -ENOBUFS in an NLMSG_ERROR), and as many again get their dump
//!   marked NLM_F_DUMP_INTR (the table changed while dumping). A receive-side ENOBUFS (the
//!   socket overflowing) is not produced: a socketpair cannot overflow that way, and the
//!   watcher's transport type is fixed; tests/nldev_socket.rs covers it.
//!
//! Each answer is counted in `WORLD/nl-stats` (`requests errors interrupted absent`), across
//! restarts.
//!
//! Usage: `soak_daemon --config FILE --world DIR`.

#[path = "../tests/support/fake_kernel.rs"]
mod fake_kernel;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use fake_kernel::{error_reply, set_last_qp_state, with_flags, Replay, NLM_F_DUMP_INTR};
use iser_guard::daemon::run::{run, Deps, Mode, Settings};
use iser_guard::daemon::topology::HostTopology;

const PRESENT: &str = "k612/nldev-1-loggedin";
const ABSENT: &str = "k612/nldev-2-inideleted";
/// rxe_ini's QP dump in the logged-in capture (its GSI entry is the part's last attribute).
const INI_QPS: &str = "k612/nldev-1-loggedin/08-res-qp-get-dump-dev0.hex";
/// NLM_F_REQUEST | NLM_F_DUMP: the request flags of a dump.
const NLM_F_DUMP: u16 = 0x300;

/// xorshift64*: the fake kernel needs unpredictability, not quality.
struct Rng(u64);

impl Rng {
    fn seeded() -> Rng {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs() ^ u64::from(d.subsec_nanos()) << 20);
        Rng(t ^ u64::from(std::process::id()) << 32 | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn percent(&mut self) -> u64 {
        self.next() % 100
    }
}

fn read(world: &Path, name: &str) -> String {
    std::fs::read_to_string(world.join(name))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// True when the request names device index 0 (rxe_ini): RDMA_NLDEV_ATTR_DEV_INDEX (type 1,
/// u32) is the first attribute, right after the 16-byte header, of every per-device request.
fn names_ini(request: &[u8]) -> bool {
    request.len() >= 24 && request[16..20] == [8, 0, 1, 0] && request[20..24] == [0, 0, 0, 0]
}

fn serve(kernel: fake_kernel::FakeKernel, world: PathBuf) {
    let present = Replay::default().moment(PRESENT);
    let stuck = Replay::default()
        .moment(PRESENT)
        .edit(INI_QPS, |r| set_last_qp_state(&mut r[0], 6));
    let absent = Replay::default().moment(ABSENT);
    let mut rng = Rng::seeded();
    // Counted across the daemon's restarts: each incarnation carries on from the file.
    let before: Vec<u64> = read(&world, "nl-stats")
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    let at = |i: usize| before.get(i).copied().unwrap_or(0);
    let (mut requests, mut errors, mut interrupted, mut gone) = (at(0), at(1), at(2), at(3));
    while let Some(req) = kernel.recv() {
        requests += 1;
        let chaos: u64 = read(&world, "nl-chaos").parse().unwrap_or(5);
        let is_absent = read(&world, "device") == "absent";
        let replay = if is_absent {
            &absent
        } else if read(&world, "gsi") == "ERR" {
            &stuck
        } else {
            &present
        };
        let dump = u16::from_ne_bytes([req[6], req[7]]) & NLM_F_DUMP == NLM_F_DUMP;
        if rng.percent() < chaos {
            errors += 1;
            let errno = [-16, -12, -105][(rng.next() % 3) as usize];
            kernel.send(&error_reply(&req, errno));
        } else if is_absent && names_ini(&req) {
            gone += 1;
            kernel.send(&error_reply(&req, -19));
        } else {
            match replay.answer(&req) {
                Some(msgs) if dump && rng.percent() < chaos => {
                    interrupted += 1;
                    let marked: Vec<Vec<u8>> = msgs
                        .iter()
                        .map(|m| with_flags(m, NLM_F_DUMP_INTR))
                        .collect();
                    kernel.reply(&req, &marked);
                }
                Some(msgs) => kernel.reply(&req, msgs),
                None => kernel.send(&error_reply(&req, -22)),
            }
        }
        let _ = std::fs::write(
            world.join("nl-stats"),
            format!("{requests} {errors} {interrupted} {gone}\n"),
        );
    }
}

struct Args {
    config: PathBuf,
    world: PathBuf,
}

fn args() -> Result<Args, String> {
    let (mut config, mut world) = (None, None);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--config" => config = it.next().map(PathBuf::from),
            "--world" => world = it.next().map(PathBuf::from),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(Args {
        config: config.ok_or("--config FILE is required")?,
        world: world.ok_or("--world DIR is required")?,
    })
}

fn main() -> ExitCode {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("soak_daemon: {e}\nusage: soak_daemon --config FILE --world DIR");
            return ExitCode::from(64);
        }
    };
    let (requests, kernel) = fake_kernel::pair();
    let (events, events_kernel) = fake_kernel::pair();
    // SAFETY: no thread has been started yet (the runtime is built after the fork), so the
    // child is a copy of a single-threaded process and may run ordinary code.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            drop((requests, events));
            // The event socket stays open and silent; the daemon's periodic dumps see the
            // changes (as on 6.12, which sends no event for a link delete/add).
            let _events_kernel = events_kernel;
            serve(kernel, args.world);
            return ExitCode::SUCCESS;
        }
        Ok(nix::unistd::ForkResult::Parent { .. }) => drop((kernel, events_kernel)),
        Err(e) => {
            eprintln!("soak_daemon: fork: {e}");
            return ExitCode::from(71);
        }
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .try_init();
    let config = match iser_guard::config::load_or_default(Some(&args.config)) {
        Ok((c, _)) => c,
        Err(e) => {
            eprintln!("soak_daemon: {e}");
            return ExitCode::from(78);
        }
    };
    // As src/cli/daemon.rs builds it.
    let rt = match tokio::runtime::Builder::new_current_thread()
        .thread_keep_alive(Duration::from_secs(300))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("soak_daemon: runtime: {e}");
            return ExitCode::from(71);
        }
    };
    let settings = Settings {
        config: config.clone(),
        config_path: Some(args.config.clone()),
        force_dry_run: false,
        take_lock: true,
        automatic_actions: true,
        read_only: false,
    };
    let code = rt.block_on(async move {
        let mut deps = Deps::real(&config, true)?;
        deps.routes = Arc::new(|_| Ok("ini0".to_string()));
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
            eprintln!("soak_daemon: {e}");
            ExitCode::from(1)
        }
    }
}
