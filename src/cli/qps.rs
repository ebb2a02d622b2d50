//! `iser-guard qps`: the live QP table from RDMA netlink (one RES_QP_GET dump per device),
//! filtered by device, state and type. Text lines as `rdma resource show qp`, JSON keys as
//! `rdma resource show qp -j`, so the two can be compared.
//!
//! Exit codes: 0 the table was read (even if empty after filtering); 69 RDMA netlink is
//! unavailable (the devices sysfs knows are listed on stderr first, since sysfs has no QPs);
//! other netlink failures as in [`crate::error::netlink_status`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::status::{gather, to_json, Gathered, QpRow};
use super::Globals;
use crate::core::qp::{QpState, QpType};
use crate::error::Error;
use crate::io::netlink::{BlockingTransport, NetlinkError, NldevClient};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this RDMA device (e.g. `rocep2s0f0`).
    #[arg(long, value_name = "NAME")]
    pub dev: Option<String>,
    /// Only QPs in this state (RESET, INIT, RTR, RTS, SQD, SQE, ERR).
    #[arg(long, value_name = "STATE", value_parser = parse_qp_state)]
    pub state: Option<QpState>,
    /// Only QPs of this type (SMI, GSI, RC, UC, UD, …).
    #[arg(long = "type", value_name = "TYPE", value_parser = parse_qp_type)]
    pub qp_type: Option<QpType>,
    /// Print JSON with the keys of `rdma resource show qp -j`.
    #[arg(long)]
    pub json: bool,
    /// Read sysfs under this root instead of `paths.sysfs-root` from the configuration.
    #[arg(long, value_name = "PATH")]
    pub sysfs_root: Option<PathBuf>,
}

/// Which QPs to show.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Device name.
    pub dev: Option<String>,
    /// QP state.
    pub state: Option<QpState>,
    /// QP type.
    pub qp_type: Option<QpType>,
}

/// Runs the subcommand.
pub fn run(args: Args, globals: &Globals) -> Result<ExitCode, Error> {
    let root = super::status::sysfs_root(args.sysfs_root, globals)?;
    let filter = Filter {
        dev: args.dev,
        state: args.state,
        qp_type: args.qp_type,
    };
    let QpTable { rows, incomplete } = match qp_table(NldevClient::open(), &root, &filter) {
        Ok(t) => t,
        Err((e, g)) => {
            explain_sysfs_only(&g);
            return Err(e.into());
        }
    };
    for warning in &incomplete {
        eprintln!("iser-guard: warning: {warning}");
    }
    if args.json {
        println!("{}", to_json(&rows)?);
    } else {
        for r in &rows {
            println!("{}", r.render_text());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The filtered QP table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QpTable {
    /// The rows, device by device in kernel order.
    pub rows: Vec<QpRow>,
    /// Devices whose QPs are missing, with why (e.g. their QP dump was refused).
    pub incomplete: Vec<String>,
}

/// Reads the QP table through `client` and filters it. On failure, returns the netlink error
/// with what sysfs showed.
pub fn qp_table<T: BlockingTransport>(
    client: Result<NldevClient<T>, NetlinkError>,
    sysfs_root: &Path,
    filter: &Filter,
) -> Result<QpTable, (NetlinkError, Box<Gathered>)> {
    let mut g = gather(client, sysfs_root);
    if let Some(e) = g.netlink_error.take() {
        return Err((e, Box::new(g)));
    }
    let mut rows = Vec::new();
    let mut incomplete = Vec::new();
    for d in g.topology.iter().flat_map(|t| t.devices()) {
        if filter.dev.as_ref().is_some_and(|n| n != &d.info.name) {
            continue;
        }
        if let Some(e) = &d.qp_error {
            incomplete.push(format!("QPs of {} not shown: {e}", d.info.name));
        }
        for q in d.qps.iter().flatten() {
            if filter.state.is_some_and(|s| s != q.state)
                || filter.qp_type.is_some_and(|t| q.qp_type.known() != Some(t))
            {
                continue;
            }
            rows.push(QpRow::from_entry(q));
        }
    }
    Ok(QpTable { rows, incomplete })
}

fn explain_sysfs_only(g: &Gathered) {
    if g.sysfs.devices.is_empty() {
        eprintln!(
            "iser-guard: sysfs ({}) shows no RDMA device either",
            g.sysfs_root.display()
        );
        return;
    }
    let names: Vec<_> = g.sysfs.devices.iter().map(|d| d.name.as_str()).collect();
    eprintln!(
        "iser-guard: sysfs ({}) shows RDMA device(s) {}, but the QP table is only available \
         through RDMA netlink (`iser-guard status` shows what sysfs has)",
        g.sysfs_root.display(),
        names.join(", ")
    );
}

/// The QP state named on the command line (`ERR`, `rts`, …).
pub fn parse_qp_state(s: &str) -> Result<QpState, String> {
    QpState::ALL
        .into_iter()
        .find(|q| q.name().eq_ignore_ascii_case(s))
        .ok_or_else(|| {
            let names: Vec<_> = QpState::ALL.iter().map(|q| q.name()).collect();
            format!("unknown QP state {s:?}; one of {}", names.join(", "))
        })
}

/// The QP type named on the command line (`GSI`, `rc`, …).
pub fn parse_qp_type(s: &str) -> Result<QpType, String> {
    let all = [0u32, 1, 2, 3, 4, 5, 6, 8, 9, 10, 0xff].map(QpType::from_kernel);
    all.into_iter()
        .flatten()
        .find(|t| t.name().eq_ignore_ascii_case(s))
        .ok_or_else(|| {
            let names: Vec<_> = all.iter().flatten().map(|t| t.name()).collect();
            format!("unknown QP type {s:?}; one of {}", names.join(", "))
        })
}
