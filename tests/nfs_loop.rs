//! The daemon's loop with an NFS over RDMA mount on the device it re-creates (the builder
//! of tests/support/daemon_loop.rs): the mount the topology source reported is remembered
//! in the journal before the re-creation, handed to the NFS check after it, and its result
//! alerted and journaled.

#[path = "support/daemon_loop.rs"]
mod daemon_loop;

use iser_guard::core::nfs_rdma::{parse_line, NfsCheckResult, NfsRdmaMount};
use iser_guard::exit::ExitStatus;
use iser_guard::io::journal::Journal;

use daemon_loop::{config, record, wait_for, LoopTest, STUCK_GSI};

fn mount() -> NfsRdmaMount {
    let line = "83 22 0:47 / /mnt/nfs rw,relatime shared:45 - nfs4 192.0.2.2:/export \
                rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=rdma,port=20049,\
                timeo=600,retrans=2,sec=sys,clientaddr=192.0.2.1,local_lock=none,addr=192.0.2.2";
    NfsRdmaMount {
        placed: Some(("rocep2s0f0".into(), 1)),
        ..parse_line(line).unwrap().unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mounts_on_the_recreated_device_are_journaled_checked_and_alerted() {
    let dir = tempfile::tempdir().unwrap();
    let d = LoopTest::new(config(dir.path(), false))
        .portal_reachable(50)
        .without_control()
        .nfs(vec![mount()])
        .start();
    d.doubles.nfs.answer(NfsCheckResult::NoAnswer {
        waited_s: 60,
        earlier_pending: false,
    });
    d.host.set("FAILED");
    d.feed(record(0, STUCK_GSI));
    wait_for(20, "no re-creation", || {
        !d.doubles.resetter.calls().is_empty()
    })
    .await;
    // Remembered in the journal before the device went (write-ahead).
    let journal = std::fs::read_to_string(Journal::new(dir.path()).path()).unwrap();
    assert!(journal.contains("nfs-mounts"), "{journal}");
    assert!(journal.contains("192.0.2.2:/export"));
    wait_for(20, "the mount was never checked", || {
        !d.doubles.nfs.calls().is_empty()
    })
    .await;
    assert_eq!(d.doubles.nfs.calls(), vec![vec![mount()]]);
    d.host.set("LOGGED_IN");
    wait_for(20, "no NFS result", || {
        d.doubles.alerts.alerts().iter().any(|a| {
            a.what
                .contains("NFS over RDMA mount(s) on rocep2s0f0 NOT answering")
        })
    })
    .await;
    let a = d
        .doubles
        .alerts
        .alerts()
        .into_iter()
        .find(|a| a.what.contains("NOT answering"))
        .unwrap();
    assert!(a.what.ends_with(": /mnt/nfs"), "{}", a.what);
    assert!(
        a.why.contains("did not answer a stat within 60 s"),
        "{}",
        a.why
    );
    wait_for(20, "result not journaled", || {
        std::fs::read_to_string(Journal::new(dir.path()).path())
            .unwrap()
            .contains("no-answer")
    })
    .await;
    assert_eq!(d.stop().await, ExitStatus::Ok.code());
}
