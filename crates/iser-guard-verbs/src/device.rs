//! The device list, an open device (`ibv_context`), port and GID queries.

use std::ffi::CStr;
use std::fmt;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;

use rdma_sys as ffi;

use crate::error::VerbsError;

/// The devices libibverbs sees (`ibv_get_device_list`), freed on drop.
pub struct DeviceList {
    list: *mut *mut ffi::ibv_device,
    len: usize,
}

impl DeviceList {
    /// Lists the devices. NULL (ENOSYS: no ib_uverbs in the kernel) and an empty list (no
    /// provider library matches the hardware) are both [`VerbsError::NoDevices`].
    pub fn new() -> Result<DeviceList, VerbsError> {
        let mut n: libc::c_int = 0;
        // SAFETY: n is a valid out pointer; the list is freed in Drop.
        let list = unsafe { ffi::ibv_get_device_list(&mut n) };
        if list.is_null() {
            let e = std::io::Error::last_os_error();
            return Err(VerbsError::NoDevices {
                why: format!("ibv_get_device_list: {e}"),
            });
        }
        let len = usize::try_from(n).unwrap_or(0);
        let me = DeviceList { list, len };
        if len == 0 {
            return Err(VerbsError::NoDevices {
                why: "ibv_get_device_list returned an empty list (no provider library for \
                      the hardware, e.g. ibverbs-providers not installed?)"
                    .into(),
            });
        }
        Ok(me)
    }

    /// The device names, in list order.
    pub fn names(&self) -> Vec<String> {
        (0..self.len).filter_map(|i| self.name_at(i)).collect()
    }

    fn name_at(&self, i: usize) -> Option<String> {
        // SAFETY: i < len, the list holds len valid device pointers while self lives.
        let dev = unsafe { *self.list.add(i) };
        if dev.is_null() {
            return None;
        }
        // SAFETY: dev is valid; ibv_get_device_name returns a NUL-terminated string or NULL.
        let p = unsafe { ffi::ibv_get_device_name(dev) };
        if p.is_null() {
            return None;
        }
        // SAFETY: p is NUL-terminated and lives as long as the list.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    /// Opens the device called `name`.
    pub fn open(&self, name: &str) -> Result<Arc<Context>, VerbsError> {
        for i in 0..self.len {
            if self.name_at(i).as_deref() == Some(name) {
                // SAFETY: i < len.
                let dev = unsafe { *self.list.add(i) };
                // SAFETY: dev is a valid device of this list; the context it returns
                // stays valid after the list is freed (libibverbs keeps a reference).
                let ctx = unsafe { ffi::ibv_open_device(dev) };
                if ctx.is_null() {
                    return Err(VerbsError::last("ibv_open_device", name));
                }
                return Ok(Arc::new(Context {
                    ptr: ctx,
                    name: name.to_string(),
                    owner: ContextOwner::Opened,
                }));
            }
        }
        Err(VerbsError::UnknownDevice {
            name: name.to_string(),
            available: self.names(),
        })
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: list came from ibv_get_device_list and is freed once.
        unsafe { ffi::ibv_free_device_list(self.list) }
    }
}

/// Opens device `name` (lists the devices, opens the one, frees the list).
pub fn open_device(name: &str) -> Result<Arc<Context>, VerbsError> {
    DeviceList::new()?.open(name)
}

/// Who closes a context.
pub(crate) enum ContextOwner {
    /// We opened it: `ibv_close_device` on drop.
    Opened,
    /// librdmacm opened it for a cm_id; keeping the id alive keeps the context valid.
    Cm(#[allow(dead_code)] Arc<dyn Send + Sync>),
}

/// An open device (`struct ibv_context`).
pub struct Context {
    pub(crate) ptr: *mut ffi::ibv_context,
    pub(crate) name: String,
    owner: ContextOwner,
}

// SAFETY: libibverbs contexts may be used from any thread (its objects are thread-safe);
// the raw pointer is only dereferenced through libibverbs calls.
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

impl Context {
    /// A context librdmacm owns (a cm_id's `verbs`), kept valid by `keep`.
    pub(crate) fn borrowed(
        ptr: *mut ffi::ibv_context,
        keep: Arc<dyn Send + Sync>,
    ) -> Result<Arc<Context>, VerbsError> {
        if ptr.is_null() {
            return Err(VerbsError::Call {
                call: "rdma_cm_id.verbs",
                device: "-".into(),
                source: std::io::Error::from_raw_os_error(libc::ENODEV),
            });
        }
        // SAFETY: ptr is a live context; its device pointer and name are valid with it.
        let name = unsafe {
            let dev = (*ptr).device;
            let p = if dev.is_null() {
                std::ptr::null()
            } else {
                ffi::ibv_get_device_name(dev)
            };
            if p.is_null() {
                "-".to_string()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        Ok(Arc::new(Context {
            ptr,
            name,
            owner: ContextOwner::Cm(keep),
        }))
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The async event fd (`ibv_context.async_fd`).
    pub(crate) fn async_fd(&self) -> i32 {
        // SAFETY: ptr is valid while self lives.
        unsafe { (*self.ptr).async_fd }
    }

    /// The device's transport (`IBV_TRANSPORT_IB` 0, `IBV_TRANSPORT_IWARP` 1, ...).
    pub fn transport(&self) -> u32 {
        // SAFETY: ptr and its device are valid while self lives.
        unsafe {
            let dev = (*self.ptr).device;
            if dev.is_null() {
                u32::MAX
            } else {
                u32::try_from((*dev).transport_type).unwrap_or(u32::MAX)
            }
        }
    }

    /// How many physical ports the device has (`ibv_query_device`).
    pub fn port_count(&self) -> Result<u32, VerbsError> {
        // SAFETY: all-zero is a valid ibv_device_attr (integers and arrays).
        let mut attr: ffi::ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: ptr is valid, attr is a valid out pointer.
        let rc = unsafe { ffi::ibv_query_device(self.ptr, &mut attr) };
        if rc != 0 {
            return Err(VerbsError::ret("ibv_query_device", &self.name, rc));
        }
        Ok(u32::from(attr.phys_port_cnt))
    }

    /// Queries one port (`ibv_query_port`).
    pub fn query_port(&self, port: u32) -> Result<PortAttrs, VerbsError> {
        let ports = self.port_count()?;
        let p = u8::try_from(port)
            .ok()
            .filter(|p| *p >= 1 && u32::from(*p) <= ports);
        let Some(p) = p else {
            return Err(VerbsError::UnknownPort {
                device: self.name.clone(),
                port,
                ports,
            });
        };
        // SAFETY: all-zero is a valid ibv_port_attr.
        let mut attr: ffi::ibv_port_attr = unsafe { std::mem::zeroed() };
        // The exported ibv_query_port takes the older, shorter struct (everything read
        // here is in it) and fills it through the provider; the full struct is larger, so
        // handing it over is safe. (rdma-sys's inline ___ibv_query_port unwraps an op.)
        // SAFETY: ptr is valid; attr is at least as large as the compat struct.
        let rc = unsafe {
            ffi::ibv_query_port(
                self.ptr,
                p,
                (&mut attr as *mut ffi::ibv_port_attr).cast::<ffi::_compat_ibv_port_attr>(),
            )
        };
        if rc != 0 {
            return Err(VerbsError::ret("ibv_query_port", &self.name, rc));
        }
        Ok(PortAttrs {
            port,
            state: attr.state,
            active_mtu: attr.active_mtu,
            lid: attr.lid,
            gid_tbl_len: u32::try_from(attr.gid_tbl_len).unwrap_or(0),
            link_layer: attr.link_layer,
        })
    }

    /// Queries GID `index` of `port` (`ibv_query_gid`).
    pub fn query_gid(&self, port: u32, index: u32) -> Result<Gid, VerbsError> {
        let p = u8::try_from(port).map_err(|_| VerbsError::UnknownPort {
            device: self.name.clone(),
            port,
            ports: 0,
        })?;
        let i = libc::c_int::try_from(index).unwrap_or(libc::c_int::MAX);
        let mut gid = ffi::ibv_gid { raw: [0; 16] };
        // SAFETY: ptr valid, gid a valid out pointer.
        let rc = unsafe { ffi::ibv_query_gid(self.ptr, p, i, &mut gid) };
        if rc != 0 {
            return Err(VerbsError::ret("ibv_query_gid", &self.name, rc));
        }
        // SAFETY: raw is the full 16-byte view of the union.
        Ok(Gid(unsafe { gid.raw }))
    }

    /// Picks the GID to use on `port`: for Ethernet (RoCE) the first IPv4-mapped GID whose
    /// sysfs type is `RoCE v2` (or any IPv4-mapped one if the type is not readable);
    /// for InfiniBand index 0.
    pub fn pick_gid(&self, info: &PortAttrs) -> Result<(u32, Gid), VerbsError> {
        if !info.is_ethernet() {
            return Ok((0, self.query_gid(info.port, 0)?));
        }
        let mut fallback = None;
        for i in 0..info.gid_tbl_len.min(256) {
            let Ok(g) = self.query_gid(info.port, i) else {
                continue;
            };
            if g.ipv4().is_none() {
                continue;
            }
            match gid_type(&self.name, info.port, i).as_deref() {
                Some("RoCE v2") => return Ok((i, g)),
                Some(_) => {
                    fallback.get_or_insert((i, g));
                }
                None => {
                    fallback.get_or_insert((i, g));
                }
            }
        }
        fallback.ok_or_else(|| VerbsError::NoAddress {
            device: self.name.clone(),
            port: info.port,
            why: "no IPv4-mapped GID in the GID table (does the port's netdev have an IPv4 \
                  address?)"
                .into(),
        })
    }
}

/// The GID type sysfs reports (`RoCE v2`, `IB/RoCE v1`), if readable.
fn gid_type(device: &str, port: u32, index: u32) -> Option<String> {
    let p = format!("/sys/class/infiniband/{device}/ports/{port}/gid_attrs/types/{index}");
    std::fs::read_to_string(Path::new(&p))
        .ok()
        .map(|s| s.trim().to_string())
}

impl Drop for Context {
    fn drop(&mut self) {
        if let ContextOwner::Opened = self.owner {
            // SAFETY: we opened it and every object on it holds an Arc to self, so they are
            // gone; closed once.
            let rc = unsafe { ffi::ibv_close_device(self.ptr) };
            if rc != 0 {
                tracing::warn!(device = %self.name, rc, "ibv_close_device failed");
            }
        }
    }
}

/// What `ibv_query_port` said, the fields the self-test needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortAttrs {
    /// Port number.
    pub port: u32,
    /// `ibv_port_state` (4 = ACTIVE).
    pub state: u32,
    /// `ibv_mtu` (1 = 256 ... 5 = 4096).
    pub active_mtu: u32,
    /// LID (InfiniBand).
    pub lid: u16,
    /// GID table length.
    pub gid_tbl_len: u32,
    /// 1 InfiniBand, 2 Ethernet.
    pub link_layer: u8,
}

/// `IBV_PORT_ACTIVE`.
pub const PORT_ACTIVE: u32 = 4;
/// `IBV_LINK_LAYER_ETHERNET`.
pub const LINK_LAYER_ETHERNET: u8 = 2;

impl PortAttrs {
    /// RoCE (or iWARP): addresses are GIDs, the AV needs a global route.
    pub fn is_ethernet(&self) -> bool {
        self.link_layer == LINK_LAYER_ETHERNET
    }

    /// The state's name.
    pub fn state_name(&self) -> &'static str {
        match self.state {
            0 => "NOP",
            1 => "DOWN",
            2 => "INIT",
            3 => "ARMED",
            4 => "ACTIVE",
            5 => "ACTIVE_DEFER",
            _ => "UNKNOWN",
        }
    }
}

/// A 16-byte GID.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`).
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        let g = &self.0;
        if g[..10].iter().all(|b| *b == 0) && g[10] == 0xff && g[11] == 0xff {
            Some(Ipv4Addr::new(g[12], g[13], g[14], g[15]))
        } else {
            None
        }
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        std::net::Ipv6Addr::from(self.0).fmt(f)
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv4_mapped_gid_gives_its_address() {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&[192, 0, 2, 1]);
        assert_eq!(Gid(g).ipv4(), Some(Ipv4Addr::new(192, 0, 2, 1)));
        assert_eq!(Gid(g).to_string(), "::ffff:192.0.2.1");
        let mut ll = [0u8; 16];
        ll[0] = 0xfe;
        ll[1] = 0x80;
        assert_eq!(Gid(ll).ipv4(), None);
    }
}
