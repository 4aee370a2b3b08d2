//! The log contract suite (sked-testkit) against [`FileLogStore`]: each case gets a store under
//! its own temporary directory.

use sked_core::ports::LogStore;
use sked_embedded::logs::FileLogStore;
use std::sync::Arc;

sked_testkit::log_contract!(|cap: u64| async move {
    // Kept for the process's life (the suite hands us no place to keep the guard; tiny).
    let dir = tempfile::tempdir().expect("tempdir").keep();
    Arc::new(FileLogStore::new(dir).with_cap(cap)) as Arc<dyn LogStore>
});
