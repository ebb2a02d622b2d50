//! The journal's on-disk format: versioned types of its own, independent of the engine's
//! internal state, so an engine refactor never breaks a journal the previous release wrote.
//!
//! - [`v1`]: the format of release 1 (field for field what `EngineSnapshot` serialised to
//!   before the journal had a type of its own). Frozen: never edit it.
//! - [`v2`]: v1 plus the engine state the real-kernel fixes added (probe start times for
//!   target-back gating, the fresh-QP check, hold re-alert times, troubled sessions, the
//!   `NoPortalKnown` hold, operator logout/login in flight); every new field has a default,
//!   so [`migrate_v1`] is "read v1 strictly, then read it again as v2".
//! - [`mapping`]: the one place that maps the current format onto the engine's
//!   [`EngineSnapshot`] and back. An engine refactor changes only that file.
//! - [`decode`] reads any known version and migrates it forward to the current one;
//!   a version newer than this build knows is refused with [`JournalFormatError::Newer`],
//!   whose message says what to do.
//!
//! Adding a version N+1: copy `vN.rs` to `vN+1.rs`, change what must change there, write
//! `migrate_vN` (vN → vN+1) below, point [`Current`] and [`VERSION`] at it, and move
//! `mapping.rs` onto the new types. Keep a fixture written by the release that wrote vN.
//!
//! Pure: bytes in, bytes out; the daemon's `io::journal` does the file I/O.

pub mod mapping;
mod multipath_map;
mod nfs_map;
mod nvme_map;
pub mod v1;
pub mod v2;

use serde::Deserialize;

use crate::recovery::EngineSnapshot;

/// The version this build writes.
pub const VERSION: u32 = 2;

/// The on-disk type of [`VERSION`].
pub type Current = v2::JournalFile;

/// Why bytes are not a journal this build can read.
#[derive(Debug, thiserror::Error)]
pub enum JournalFormatError {
    /// Not JSON, no `version` field, or the fields do not match the version it names.
    #[error(
        "not a valid iser-guard journal{}: {source}",
        version.map_or_else(String::new, |v| format!(" of format version {v}"))
    )]
    Invalid {
        /// The version it claims, if it got that far.
        version: Option<u32>,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// Written by a newer iser-guard whose format this build does not know.
    #[error(
        "the journal has format version {found}, newer than this iser-guard knows (up to \
         {VERSION}): it was written by a newer release. Run that release again, or move the \
         journal aside to start afresh (remembered sessions are then re-learned from iscsiadm)"
    )]
    Newer {
        /// The version found.
        found: u32,
    },
    /// Well-formed, but a value the engine cannot hold (a portal that is not an IP address).
    #[error("the journal's {field} is not valid: {reason}")]
    Value {
        /// Which kind of field.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A version number no release ever wrote (0).
    #[error("the journal has format version {found}, which no iser-guard release wrote")]
    Unknown {
        /// The version found.
        found: u32,
    },
}

#[derive(Deserialize)]
struct VersionOnly {
    version: u32,
}

/// Reads a journal of any known version, migrated to the current format.
pub(crate) fn decode_file(bytes: &[u8]) -> Result<Current, JournalFormatError> {
    let VersionOnly { version } =
        serde_json::from_slice(bytes).map_err(|source| JournalFormatError::Invalid {
            version: None,
            source,
        })?;
    let invalid = |source| JournalFormatError::Invalid {
        version: Some(version),
        source,
    };
    match version {
        1 => migrate_v1(serde_json::from_slice::<v1::JournalFile>(bytes).map_err(invalid)?),
        2 => serde_json::from_slice::<v2::JournalFile>(bytes).map_err(invalid),
        v if v > VERSION => Err(JournalFormatError::Newer { found: v }),
        v => Err(JournalFormatError::Unknown { found: v }),
    }
}

/// v1 → v2: v2 is v1 with new fields that all have defaults and new enum variants, so the
/// strictly-read v1 file, written out again with version 2, is read as v2 unchanged.
pub(crate) fn migrate_v1(file: v1::JournalFile) -> Result<v2::JournalFile, JournalFormatError> {
    let invalid = |source| JournalFormatError::Invalid {
        version: Some(1),
        source,
    };
    let mut value = serde_json::to_value(file).map_err(invalid)?;
    if let Some(obj) = value.as_object_mut() {
        obj.insert("version".into(), serde_json::Value::from(2u32));
    }
    serde_json::from_value(value).map_err(invalid)
}

/// Reads a journal of any known version into the engine's snapshot.
pub fn decode(bytes: &[u8]) -> Result<EngineSnapshot, JournalFormatError> {
    decode_file(bytes)?.into_snapshot()
}

/// Reads a journal of any known version into the engine's snapshot and the daemon's
/// incident list (empty in files written before incidents were kept).
pub fn decode_with_incidents(
    bytes: &[u8],
) -> Result<(EngineSnapshot, Vec<crate::observe::Incident>), JournalFormatError> {
    let file = decode_file(bytes)?;
    let incidents = file.incidents();
    Ok((file.into_snapshot()?, incidents))
}

/// The current format's bytes for `snapshot` and the daemon's incident list.
pub fn encode_with_incidents(
    snapshot: &EngineSnapshot,
    incidents: &[crate::observe::Incident],
) -> Vec<u8> {
    serde_json::to_vec_pretty(&Current::from_parts(snapshot, incidents)).unwrap_or_default()
}

/// The current format's bytes for `snapshot` (pretty JSON: operators read it).
pub fn encode(snapshot: &EngineSnapshot) -> Vec<u8> {
    // Serialising plain data with string keys cannot fail; an empty journal would be
    // refused on load rather than silently accepted.
    serde_json::to_vec_pretty(&Current::from_snapshot(snapshot)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_journal_is_named_in_words_with_its_version_when_known() {
        let err = decode(b"{\"ports\": [tru").unwrap_err().to_string();
        assert!(err.starts_with("not a valid iser-guard journal: "), "{err}");
        assert!(!err.contains("None"), "{err}");
        let err = decode(br#"{"version": 2, "ports": 7}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("not a valid iser-guard journal of format version 2: "),
            "{err}"
        );
    }

    #[test]
    fn a_newer_version_is_refused_with_what_to_do() {
        let err = decode(br#"{"version": 7, "whatever": true}"#).unwrap_err();
        assert!(
            matches!(err, JournalFormatError::Newer { found: 7 }),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("newer release") && msg.contains("move the journal aside"),
            "{msg}"
        );
    }

    #[test]
    fn version_zero_and_garbage_are_typed_errors() {
        assert!(matches!(
            decode(br#"{"version": 0}"#),
            Err(JournalFormatError::Unknown { found: 0 })
        ));
        assert!(matches!(
            decode(b"{\"version\": 1, \"ports\": [tru"),
            Err(JournalFormatError::Invalid { .. })
        ));
        assert!(matches!(
            decode(b"[]"),
            Err(JournalFormatError::Invalid { version: None, .. })
        ));
        // Right version, wrong fields.
        assert!(matches!(
            decode(br#"{"version": 1, "ports": 3}"#),
            Err(JournalFormatError::Invalid {
                version: Some(1),
                ..
            })
        ));
    }
}
