//! The payload spawner: one small helper process per worker process that starts every
//! `command` payload of that worker and ends them all when the worker dies.
//!
//! Why a separate process: a worker is a large, multi-threaded process. Starting each payload
//! from it with a parent-death signal needs `fork` (a `pre_exec` closure rules out
//! `posix_spawn`), which copies the worker's page tables and flushes every thread's TLB; and
//! the kernel's parent-death signal reaches only the direct child, so grandchildren (`sh -c
//! 'a & b'`) would outlive a worker killed with SIGKILL. The spawner is started once (an exec
//! of the `sked` binary), starts payloads with `posix_spawn`, and watches its socket to the
//! worker: end of file means the worker is gone, and every payload's whole process group is
//! killed. BENCHMARKS.md ("Payloads start through a spawner process") has what it gained.
//!
//! - [`client`]: the worker's side ([`Spawner`]), used by the process executor.
//! - [`serve`]: the spawner process, run by the binary's hidden `__spawner` subcommand.
//! - [`wire`]: the messages between them.
//!
//! What this module must not do: decide how a payload is stopped (the executor signals the
//! groups itself) or what its end means.

pub mod client;
pub mod serve;
pub mod wire;

pub use client::{SPAWNER_SUBCOMMAND, SpawnError, Spawner};
pub use serve::serve;
