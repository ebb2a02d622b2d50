//! The daemon's loop with an NVMe over RDMA controller on the device it re-creates (the
//! builder of tests/support/daemon_loop.rs): the controller the topology source reported is
//! remembered in the journal before the re-creation, handed to the NVMe executor after it,
//! and its result alerted.

#[path = "support/daemon_loop.rs"]
mod daemon_loop;

use iser_guard::core::nvme_fabrics::{
    parse_fabrics_address, NvmeBackResult, NvmeNsRef, NvmeRdmaController,
};
use iser_guard::exit::ExitStatus;
use iser_guard::io::journal::Journal;

use daemon_loop::{config, record, wait_for, LoopTest, STUCK_GSI};

fn controller() -> NvmeRdmaController {
    NvmeRdmaController {
        name: "nvme0".into(),
        address: parse_fabrics_address("traddr=192.0.2.2,trsvcid=4420\n").unwrap(),
        subsysnqn: "nqn.2014-08.org.example:lab-nvme".into(),
        hostnqn: Some(
            "nqn.2014-08.org.nvmexpress:uuid:0b6a3c1e-5b1f-4a57-9d0e-1f2a3b4c5d6e".into(),
        ),
        hostid: Some("0b6a3c1e-5b1f-4a57-9d0e-1f2a3b4c5d6e".into()),
        state: "connecting".into(),
        io_queues: Some(4),
        queue_size: Some(128),
        ctrl_loss_tmo: Some(600),
        reconnect_delay: Some(10),
        kato: Some(5),
        namespaces: vec![NvmeNsRef {
            block: "nvme0n1".into(),
            nsid: Some(1),
        }],
        placed: Some(("rocep2s0f0".into(), 1)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controllers_on_the_recreated_device_are_journaled_reconnected_and_alerted() {
    let dir = tempfile::tempdir().unwrap();
    let d = LoopTest::new(config(dir.path(), false))
        .portal_reachable(50)
        .without_control()
        .nvme(vec![controller()])
        .start();
    d.doubles.nvme.answer(NvmeBackResult::ReadFailed {
        now: "nvme1".into(),
        namespace: "nvme1n1".into(),
        reason: "Input/output error (os error 5)".into(),
    });
    d.host.set("FAILED");
    d.feed(record(0, STUCK_GSI));
    wait_for(20, "no re-creation", || {
        !d.doubles.resetter.calls().is_empty()
    })
    .await;
    // Remembered in the journal before the device went (write-ahead).
    let journal = std::fs::read_to_string(Journal::new(dir.path()).path()).unwrap();
    assert!(journal.contains("nvme-controllers"), "{journal}");
    assert!(journal.contains("nqn.2014-08.org.example:lab-nvme"));
    wait_for(20, "the controller was never reconnected", || {
        !d.doubles.nvme.calls().is_empty()
    })
    .await;
    assert_eq!(d.doubles.nvme.calls(), vec![vec![controller()]]);
    d.host.set("LOGGED_IN");
    wait_for(20, "no NVMe result", || {
        d.doubles.alerts.alerts().iter().any(|a| {
            a.what
                .contains("NVMe over RDMA controller(s) on rocep2s0f0 NOT back")
        })
    })
    .await;
    let a = d
        .doubles
        .alerts
        .alerts()
        .into_iter()
        .find(|a| a.what.contains("NOT back"))
        .unwrap();
    assert!(
        a.why
            .contains("a direct read of nvme1n1 failed: Input/output error"),
        "{}",
        a.why
    );
    // The result is journaled with the controller.
    wait_for(20, "result not journaled", || {
        std::fs::read_to_string(Journal::new(dir.path()).path())
            .unwrap()
            .contains("read-failed")
    })
    .await;
    assert_eq!(d.stop().await, ExitStatus::Ok.code());
}
