//! Reading `/proc/self/mountinfo` for the NFS over RDMA mounts
//! ([`crate::core::nfs_rdma::parse_mountinfo`] does the parsing): the daemon's topology
//! source reads it with each report, `status` once.

use std::path::Path;

use crate::core::nfs_rdma::{parse_mountinfo, NfsRdmaMount};

/// The NFS over RDMA mounts of the mountinfo file at `path`, and why lines (or the file)
/// could not be read, in words.
pub fn nfs_rdma_mounts(path: &Path) -> (Vec<NfsRdmaMount>, Vec<String>) {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let p = parse_mountinfo(&text);
            let skipped = p.skipped.iter().map(ToString::to_string).collect();
            (p.mounts, skipped)
        }
        Err(e) => (Vec::new(), vec![format!("{}: {e}", path.display())]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixture_mountinfo_gives_its_rdma_mounts_and_a_missing_file_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mountinfo");
        std::fs::write(
            &path,
            "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n\
             83 22 0:47 / /mnt/nfs rw,relatime shared:45 - nfs4 192.0.2.10:/export \
             rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=rdma,port=20049,\
             timeo=600,retrans=2,sec=sys,clientaddr=192.0.2.1,local_lock=none,addr=192.0.2.10\n\
             bad line\n",
        )
        .unwrap();
        let (mounts, skipped) = nfs_rdma_mounts(&path);
        assert_eq!(mounts.len(), 1);
        assert_eq!(mounts[0].mount_point, "/mnt/nfs");
        assert_eq!(
            skipped,
            ["mountinfo line 3: 2 fields, a mountinfo line has at least 10"]
        );
        let (mounts, skipped) = nfs_rdma_mounts(&dir.path().join("absent"));
        assert!(mounts.is_empty());
        assert_eq!(skipped.len(), 1);
        assert!(skipped[0].contains("absent"), "{skipped:?}");
    }
}
