//! Rebuilds the crate when a migration is added: refinery's `embed_migrations!` reads the
//! directory at compile time, and Cargo notices only the files it has seen change.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
