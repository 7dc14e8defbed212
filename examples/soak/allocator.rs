//! The soak's allocator, and what it tells about its resident bytes.
//!
//! jemalloc with a single arena unless a feature chooses another
//! allocator to compare: `alloc-system` (glibc's malloc) or
//! `alloc-mimalloc`. One arena, because the crate docs advise it to a
//! broker that runs for long (their "Memory over hours" section says
//! why, with the figures). `_RJEM_MALLOC_CONF` overrides it at run time
//! (`narenas:8` is the default of a 2-core machine).

#[cfg(all(feature = "alloc-system", feature = "alloc-mimalloc"))]
compile_error!("choose one of alloc-system and alloc-mimalloc");

#[cfg(not(any(feature = "alloc-system", feature = "alloc-mimalloc")))]
pub use jemalloc::*;
#[cfg(all(feature = "alloc-mimalloc", not(feature = "alloc-system")))]
pub use mimalloc::*;
#[cfg(feature = "alloc-system")]
pub use system::*;

/// jemalloc's small size classes: (block size, bytes of its slabs, bytes
/// of the blocks in use in them), as [`bins`] reads them.
pub type Bins = Vec<(usize, usize, usize)>;

#[cfg(not(any(feature = "alloc-system", feature = "alloc-mimalloc")))]
mod jemalloc {
    use tikv_jemalloc_ctl::{epoch, opt, stats};

    pub type Inner = tikv_jemallocator::Jemalloc;
    pub const INNER: Inner = tikv_jemallocator::Jemalloc;

    /// jemalloc's options, read at its start before its environment
    /// variable (`tikv-jemallocator` prefixes both names with `_rjem_`).
    /// Without the background threads the workspace's build turns on,
    /// as the soak's hours in BENCHMARKS.md were measured.
    #[export_name = "_rjem_malloc_conf"]
    static MALLOC_CONF: &[u8; 34] = b"narenas:1,background_thread:false\0";

    /// The allocator and its arenas for threads (beside them jemalloc
    /// keeps one for blocks of megabytes), as jemalloc reports them.
    pub fn name() -> String {
        match opt::narenas::read() {
            Ok(1) => "jemalloc, 1 arena".into(),
            Ok(n) => format!("jemalloc, {n} arenas"),
            Err(e) => format!("jemalloc (arenas unknown: {e})"),
        }
    }

    /// The columns [`row`] prints.
    pub const HEADER: &str = "   active MiB  metadata MiB  unused MiB";

    /// jemalloc's pages in use (which hold the heap and the gaps between
    /// its blocks), its own metadata, and the rest of what it keeps
    /// resident: freed pages not yet given back to the system.
    pub fn row() -> String {
        let read = || -> Result<(usize, usize, usize), tikv_jemalloc_ctl::Error> {
            epoch::advance()?;
            Ok((
                stats::active::read()?,
                stats::metadata::read()?,
                stats::resident::read()?,
            ))
        };
        match read() {
            Ok((active, metadata, resident)) => {
                let mib = |b: usize| b as f64 / 1048576.0;
                let unused = resident.saturating_sub(active + metadata);
                format!(
                    "{:>13.1} {:>13.1} {:>11.1}",
                    mib(active),
                    mib(metadata),
                    mib(unused)
                )
            }
            Err(e) => format!("   jemalloc stats unavailable: {e}"),
        }
    }

    /// Each small size class's slabs: (block size, bytes of its slabs,
    /// bytes of the blocks in use in them). What the slabs hold beyond
    /// the blocks is the class's share of the gap between the active
    /// pages and the heap. Empty if jemalloc does not tell.
    pub fn bins() -> super::Bins {
        // All arenas merged (jemalloc's `MALLCTL_ARENAS_ALL`).
        const ALL: u32 = 4096;
        let read = || -> Result<super::Bins, tikv_jemalloc_ctl::Error> {
            epoch::advance()?;
            // SAFETY: jemalloc's `arenas.nbins` is an `unsigned`.
            let count: u32 = unsafe { tikv_jemalloc_ctl::raw::read(b"arenas.nbins\0")? };
            (0..count)
                .map(|j| {
                    let slabs = size(&format!("stats.arenas.{ALL}.bins.{j}.curslabs"))?;
                    let slab = size(&format!("arenas.bin.{j}.slab_size"))?;
                    let blocks = size(&format!("stats.arenas.{ALL}.bins.{j}.curregs"))?;
                    let block = size(&format!("arenas.bin.{j}.size"))?;
                    Ok((block, slabs * slab, blocks * block))
                })
                .collect()
        };
        read().unwrap_or_default()
    }

    /// One of jemalloc's `size_t` settings or statistics, by name.
    fn size(name: &str) -> Result<usize, tikv_jemalloc_ctl::Error> {
        let name = format!("{name}\0");
        // SAFETY: every name passed here is one of jemalloc's `size_t`s.
        unsafe { tikv_jemalloc_ctl::raw::read(name.as_bytes()) }
    }
}

/// The other allocators tell nothing beyond the heap the soak counts.
#[cfg(any(feature = "alloc-system", feature = "alloc-mimalloc"))]
mod silent {
    pub const HEADER: &str = "";
    pub fn row() -> String {
        String::new()
    }
    pub fn bins() -> super::Bins {
        Vec::new()
    }
}

#[cfg(all(feature = "alloc-mimalloc", not(feature = "alloc-system")))]
mod mimalloc {
    pub use super::silent::*;
    pub type Inner = ::mimalloc::MiMalloc;
    pub const INNER: Inner = ::mimalloc::MiMalloc;
    pub fn name() -> String {
        "mimalloc".into()
    }
}

#[cfg(feature = "alloc-system")]
mod system {
    pub use super::silent::*;
    pub type Inner = std::alloc::System;
    pub const INNER: Inner = std::alloc::System;
    pub fn name() -> String {
        "system (glibc malloc)".into()
    }
}
