//! The checker on a real directory (the real statx), and on stat doubles that fail, or hang
//! until the test lets them go.

use super::*;
use std::sync::atomic::AtomicUsize;
use std::sync::Condvar;

fn mount(at: &Path) -> NfsRdmaMount {
    NfsRdmaMount {
        mount_point: at.display().to_string(),
        source: "192.0.2.10:/export".into(),
        fstype: "nfs4".into(),
        version: Some("4.2".into()),
        server: "192.0.2.10".into(),
        port: Some(20049),
        client_addr: None,
        proto: "rdma".into(),
        placed: Some(("rxe0".into(), 1)),
    }
}

#[test]
fn a_directory_answers_the_real_stat_and_a_missing_one_gives_its_errno() {
    let dir = tempfile::tempdir().unwrap();
    let c = StatNfsCheck::new(Arc::new(statx_force_sync), Duration::from_millis(10));
    let missing = dir.path().join("gone");
    let r = c.check(
        &[mount(dir.path()), mount(&missing)],
        Duration::from_secs(1),
    );
    assert!(r[0].result.answered(), "{}", r[0]);
    assert_eq!(r[0].mount.mount_point, dir.path().display().to_string());
    match &r[1].result {
        NfsCheckResult::Error { errno } => {
            assert!(errno.contains("os error 2"), "{errno}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(c.abandoned(), 0);
    assert!(c.pending_now().is_empty());
}

#[test]
fn a_failing_stat_is_tried_again_within_the_window_until_it_answers() {
    let calls = Arc::new(AtomicUsize::new(0));
    let n = calls.clone();
    let stat: StatFn = Arc::new(move |_| {
        if n.fetch_add(1, Ordering::SeqCst) < 2 {
            Err(std::io::Error::from_raw_os_error(libc::EIO))
        } else {
            Ok(())
        }
    });
    let c = StatNfsCheck::new(stat, Duration::from_millis(1));
    let r = c.check(&[mount(Path::new("/mnt/x"))], Duration::from_secs(30));
    assert!(r[0].result.answered(), "{}", r[0]);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

/// A stat that hangs until [`HungStat::open`], counting its calls.
#[derive(Default)]
struct HungStat {
    open: Mutex<bool>,
    cv: Condvar,
    calls: AtomicUsize,
}

impl HungStat {
    fn stat(self: &Arc<Self>) -> StatFn {
        let g = self.clone();
        Arc::new(move |_| {
            g.calls.fetch_add(1, Ordering::SeqCst);
            let mut open = lock(&g.open);
            while !*open {
                open =
                    g.cv.wait(open)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            Ok(())
        })
    }

    fn open(&self) {
        *lock(&self.open) = true;
        self.cv.notify_all();
    }
}

#[test]
fn a_hung_stat_is_abandoned_at_the_windows_end_and_never_doubled() {
    let gate = Arc::new(HungStat::default());
    let c = StatNfsCheck::new(gate.stat(), Duration::from_millis(1));
    let m = mount(Path::new("/mnt/hard"));
    let window = Duration::from_millis(300);
    let r = c.check(std::slice::from_ref(&m), window);
    assert_eq!(
        r[0].result,
        NfsCheckResult::NoAnswer {
            waited_s: 0,
            earlier_pending: false
        }
    );
    assert_eq!(c.abandoned(), 1);
    assert_eq!(c.pending_now(), [PathBuf::from("/mnt/hard")]);
    // A second check while the first stat hangs starts none of its own.
    let r = c.check(std::slice::from_ref(&m), window);
    assert_eq!(
        r[0].result,
        NfsCheckResult::NoAnswer {
            waited_s: 0,
            earlier_pending: true
        }
    );
    // The first stat's thread runs (however slowly it was scheduled), and it alone.
    let started = (0..1000).any(|_| {
        if gate.calls.load(Ordering::SeqCst) > 0 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
        false
    });
    assert!(started);
    assert_eq!(gate.calls.load(Ordering::SeqCst), 1);
    assert_eq!(c.abandoned(), 1, "nothing new was abandoned");
    // The server answers at last: the hung stat returns and the mount point is free.
    gate.open();
    let freed = (0..1000).any(|_| {
        if c.pending_now().is_empty() {
            return true;
        }
        std::thread::yield_now();
        std::thread::sleep(Duration::from_millis(5));
        false
    });
    assert!(freed, "the returned stat unmarks its mount point");
    let r = c.check(std::slice::from_ref(&m), Duration::from_secs(5));
    assert!(r[0].result.answered(), "{}", r[0]);
    assert_eq!(gate.calls.load(Ordering::SeqCst), 2);
}

#[test]
fn a_hung_mount_does_not_delay_the_others_answer() {
    let gate = Arc::new(HungStat::default());
    let hung = gate.stat();
    let stat: StatFn = Arc::new(move |p: &Path| {
        if p == Path::new("/mnt/hard") {
            hung(p)
        } else {
            Ok(())
        }
    });
    let c = StatNfsCheck::new(stat, Duration::from_millis(1));
    let r = c.check(
        &[mount(Path::new("/mnt/hard")), mount(Path::new("/mnt/ok"))],
        // Room for a loaded host to schedule the answering stat; the hung one waits it out.
        Duration::from_secs(1),
    );
    assert!(!r[0].result.answered());
    assert!(r[1].result.answered());
    gate.open();
}

#[test]
fn the_scripted_check_answers_queued_results_then_answered() {
    let s = ScriptedNfsCheck::default();
    s.answer(NfsCheckResult::Error {
        errno: "Input/output error (os error 5)".into(),
    });
    let m = mount(Path::new("/mnt/a"));
    let r = s.check(&[m.clone(), m.clone()], Duration::from_secs(1));
    assert_eq!(r[0].result.label(), "error");
    assert!(r[1].result.answered());
    assert_eq!(s.calls(), [vec![m.clone(), m]]);
}

#[test]
fn a_mount_read_from_a_fixture_mountinfo_is_checked_at_its_directory() {
    // The mount point is a real directory with a space in its name, escaped in mountinfo
    // as the kernel escapes it.
    let dir = tempfile::tempdir().unwrap();
    let point = dir.path().join("nfs data");
    std::fs::create_dir(&point).unwrap();
    let escaped = point.display().to_string().replace(' ', "\\040");
    let info = dir.path().join("mountinfo");
    std::fs::write(
        &info,
        format!(
            "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n\
             83 22 0:47 / {escaped} rw,relatime shared:45 - nfs4 192.0.2.10:/export \
             rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=rdma,port=20049,\
             timeo=600,retrans=2,sec=sys,clientaddr=192.0.2.1,local_lock=none,addr=192.0.2.10\n"
        ),
    )
    .unwrap();
    let (mounts, skipped) = crate::io::mountinfo::nfs_rdma_mounts(&info);
    assert!(skipped.is_empty(), "{skipped:?}");
    assert_eq!(mounts[0].mount_point, point.display().to_string());
    let r = StatNfsCheck::default().check(&mounts, Duration::from_secs(5));
    assert!(r[0].result.answered(), "{}", r[0]);
}
