//! Getting the metrics out: the node_exporter textfile, rewritten atomically every
//! `metrics.interval` and once more at shutdown, and the optional loopback HTTP endpoint.
//!
//! The file is replaced with [`crate::io::atomic::write_atomic_mode`] (temporary file in the
//! same directory, fsync, rename), so node_exporter never reads a torn file; it is mode 0644
//! because node_exporter runs as its own user. Writes run on the blocking pool so an fsync
//! never stalls the daemon loop. A failed write is logged once per distinct error (a missing
//! node_exporter directory is not worth a line every 15 s) and retried at the next tick.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Metrics;

/// Mode of the textfile: node_exporter (another user) reads it.
pub const TEXTFILE_MODE: u32 = 0o644;

/// Why part of the exporter could not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// `metrics.listen` could not be bound.
    #[error("cannot listen for metrics on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The OS error (or the loopback refusal).
        #[source]
        source: std::io::Error,
    },
}

/// The running exporter tasks.
#[derive(Debug)]
pub struct Exporter {
    metrics: Metrics,
    textfile: PathBuf,
    writer: tokio::task::JoinHandle<()>,
    http: Option<(SocketAddr, tokio::task::JoinHandle<()>)>,
}

/// Writes the exposition to `path` atomically (blocking).
pub fn write_textfile(path: &Path, metrics: &Metrics) -> Result<(), String> {
    crate::io::atomic::write_atomic_mode(path, metrics.encode().as_bytes(), TEXTFILE_MODE)
        .map_err(|e| e.to_string())
}

async fn write_in_background(path: PathBuf, metrics: Metrics) -> Result<(), String> {
    tokio::task::spawn_blocking(move || write_textfile(&path, &metrics))
        .await
        .map_err(|e| format!("the write task failed: {e}"))?
}

impl Exporter {
    /// Starts what `cfg` asks for: nothing when `metrics.enabled` is false or `metrics` is
    /// disabled (`None`); else the textfile writer and, with `metrics.listen`, the HTTP
    /// endpoint. An endpoint that cannot be bound is logged and left out: the daemon's
    /// protection never depends on its metrics. Must be called inside the runtime.
    pub async fn start(cfg: &crate::config::MetricsConfig, metrics: &Metrics) -> Option<Exporter> {
        if !cfg.enabled || !metrics.is_enabled() {
            return None;
        }
        let http = match cfg.listen {
            None => None,
            Some(addr) => match super::http::bind(addr).await {
                Ok(listener) => {
                    let bound = listener.local_addr().unwrap_or(addr);
                    tracing::info!(%bound, "metrics: serving /metrics");
                    Some((
                        bound,
                        tokio::spawn(super::http::serve(listener, metrics.clone())),
                    ))
                }
                Err(source) => {
                    let e = MetricsError::Listen { addr, source };
                    tracing::error!("metrics: {e}; only the textfile is written");
                    None
                }
            },
        };
        let (path, interval, m) = (cfg.textfile.clone(), cfg.interval, metrics.clone());
        tracing::info!(
            textfile = %path.display(),
            every_s = interval.as_secs_f64(),
            "metrics: writing the node_exporter textfile"
        );
        let writer = tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval.max(Duration::from_secs(1)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut last_error: Option<String> = None;
            loop {
                tick.tick().await;
                match write_in_background(path.clone(), m.clone()).await {
                    Ok(()) => {
                        if last_error.take().is_some() {
                            tracing::info!(textfile = %path.display(), "metrics: textfile written again");
                        }
                    }
                    Err(e) => {
                        if last_error.as_deref() != Some(e.as_str()) {
                            tracing::warn!(
                                "metrics: cannot write the textfile: {e}; retrying every {} s",
                                interval.as_secs()
                            );
                        }
                        last_error = Some(e);
                    }
                }
            }
        });
        Some(Exporter {
            metrics: metrics.clone(),
            textfile: cfg.textfile.clone(),
            writer,
            http,
        })
    }

    /// Where the HTTP endpoint listens, if it does.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http.as_ref().map(|(a, _)| *a)
    }

    /// Stops the tasks and writes the textfile one last time (the final counts, and a last
    /// poll timestamp that then ages: "not polling" alerts fire for a stopped daemon).
    pub async fn stop(self) {
        self.writer.abort();
        let _ = self.writer.await;
        if let Some((_, task)) = self.http {
            task.abort();
            let _ = task.await;
        }
        if let Err(e) = write_in_background(self.textfile.clone(), self.metrics).await {
            tracing::warn!("metrics: cannot write the textfile at shutdown: {e}");
        }
    }
}
