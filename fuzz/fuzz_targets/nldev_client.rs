//! The RDMA netlink client and the topology model fed arbitrary kernel datagrams: never a
//! panic, whatever the framing, sequence numbers, error codes or attributes.
//!
//! Input: a list of datagrams, each `[len_lo, len_hi, bytes…]`. The fake transport stamps the
//! current request's sequence number into each datagram's first header (when it has one) so
//! the fuzzer reaches the reply handling instead of the stale-reply filter.

#![no_main]

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use iser_guard::core::nldev::{MonitorEvent, NldevMessage};
use iser_guard::core::time::Instant;
use iser_guard::core::topology::Topology;
use iser_guard::io::netlink::{MonitorRead, NldevClient, NldevMonitor, BlockingTransport};
use libfuzzer_sys::fuzz_target;

struct Script {
    datagrams: VecDeque<Vec<u8>>,
    seq: [u8; 4],
}

impl BlockingTransport for Script {
    fn send(&mut self, d: &[u8]) -> io::Result<()> {
        if let Some(s) = d.get(8..12) {
            self.seq.copy_from_slice(s);
        }
        Ok(())
    }

    fn recv(&mut self, _: Duration) -> io::Result<Option<Vec<u8>>> {
        Ok(self.datagrams.pop_front().map(|mut d| {
            if let Some(s) = d.get_mut(8..12) {
                s.copy_from_slice(&self.seq);
            }
            d
        }))
    }
}

fn datagrams(mut data: &[u8]) -> VecDeque<Vec<u8>> {
    let mut out = VecDeque::new();
    while data.len() >= 2 {
        let len = usize::from(u16::from_le_bytes([data[0], data[1]])).min(data.len() - 2);
        out.push_back(data[2..2 + len].to_vec());
        data = &data[2 + len..];
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let script = Script {
        datagrams: datagrams(data),
        seq: [0; 4],
    };
    let mut client = NldevClient::new(script)
        .with_timeout(Duration::from_millis(1))
        .with_dump_attempts(2);
    let mut model = Topology::new();
    if let Ok(report) = client.snapshot(&|_| None) {
        model.apply_snapshot(report.snapshot, Instant(0));
    }

    let mut monitor = NldevMonitor::new(Script {
        datagrams: datagrams(data),
        seq: [0; 4],
    });
    for i in 0..64 {
        match monitor.next::<NldevMessage>(Duration::ZERO) {
            Ok(MonitorRead::Events(msgs)) => {
                for m in &msgs {
                    if let Ok(ev) = MonitorEvent::try_from(m) {
                        model.apply_monitor_event(&ev, Instant(i));
                    }
                }
            }
            _ => break,
        }
    }
});
