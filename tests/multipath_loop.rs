//! The daemon's loop on a host whose session's disk is a path of a dm-multipath map (the
//! builder of tests/support/daemon_loop.rs, multipathd scripted): the reader's paths reach
//! the engine, the path on the re-created device is journaled before the re-creation, handed
//! to the multipath executor after the sessions' verification, and its result alerted and
//! journaled.

#[path = "support/daemon_loop.rs"]
mod daemon_loop;

use iser_guard::core::multipath::parse_paths;
use iser_guard::exit::ExitStatus;
use iser_guard::io::journal::Journal;

use daemon_loop::{config, record, wait_for, LoopTest, STUCK_GSI};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_path_on_the_recreated_device_is_journaled_checked_and_alerted() {
    let dir = tempfile::tempdir().unwrap();
    // sda (the session's disk, failed by the fault) and sdb, a path elsewhere: no hold.
    let paths = parse_paths(
        "mpatha|sda|8:0|0:0:0:0|failed|running|faulty\n\
         mpatha|sdb|8:16|5:0:0:0|active|running|ready\n",
    )
    .paths;
    let d = LoopTest::new(config(dir.path(), false))
        .portal_reachable(50)
        .without_control()
        .multipath(paths)
        .start();
    d.host.set("FAILED");
    d.feed(record(0, STUCK_GSI));
    wait_for(20, "no re-creation", || {
        !d.doubles.resetter.calls().is_empty()
    })
    .await;
    // Remembered in the journal before the device went (write-ahead).
    let journal = std::fs::read_to_string(Journal::new(dir.path()).path()).unwrap();
    assert!(journal.contains("multipath-paths"), "{journal}");
    d.host.set("LOGGED_IN");
    wait_for(20, "the path was never checked", || {
        !d.doubles.multipath.calls().is_empty()
    })
    .await;
    let calls = d.doubles.multipath.calls();
    assert_eq!(calls[0].len(), 1);
    assert_eq!(calls[0][0].dev, "sda");
    assert_eq!(calls[0][0].map, "mpatha");
    wait_for(20, "no multipath result", || {
        d.doubles.alerts.alerts().iter().any(|a| {
            a.what
                .contains("1 dm-multipath path(s) on rocep2s0f0 active in their maps again")
        })
    })
    .await;
    wait_for(20, "result not journaled", || {
        let bytes = std::fs::read(Journal::new(dir.path()).path()).unwrap();
        iser_guard::core::journal::decode(&bytes)
            .ok()
            .and_then(|snap| {
                snap.devices
                    .into_iter()
                    .find(|d| d.name == "rocep2s0f0")
                    .and_then(|d| d.recreation)
            })
            .is_some_and(|r| {
                r.multipath_back.len() == 1
                    && r.multipath_back[0].result
                        == iser_guard::core::multipath::PathBackResult::Active { dev: "sda".into() }
            })
    })
    .await;
    assert_eq!(d.stop().await, ExitStatus::Ok.code());
}
