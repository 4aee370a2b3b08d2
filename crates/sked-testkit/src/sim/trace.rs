//! [`Trace`]: the simulation's event log, folded into a digest (FNV-1a, 64 bits, written out
//! here so it never changes with a dependency) and kept in part for failure reports.
//!
//! Two runs of one seed must produce the same lines in the same order: the digest proves it.

use std::collections::VecDeque;
use std::fmt::Write;

/// Lines kept for a failure report by default.
pub const KEPT: usize = 60;

/// The event log of one simulation.
#[derive(Debug, Clone)]
pub struct Trace {
    /// FNV-1a state over every line so far.
    hash: u64,
    /// How many lines.
    lines: u64,
    /// The latest lines.
    tail: VecDeque<String>,
    /// How many of the latest lines to keep.
    kept: usize,
}

impl Default for Trace {
    fn default() -> Self {
        Trace::keeping(KEPT)
    }
}

impl Trace {
    /// An empty log that keeps its latest `kept` lines for the report.
    pub fn keeping(kept: usize) -> Self {
        Trace {
            hash: 0xcbf2_9ce4_8422_2325,
            lines: 0,
            tail: VecDeque::new(),
            kept,
        }
    }

    /// Appends one line.
    pub fn line(&mut self, text: String) {
        for b in text.as_bytes().iter().chain(b"\n") {
            self.hash ^= u64::from(*b);
            self.hash = self.hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.lines += 1;
        if self.tail.len() >= self.kept {
            self.tail.pop_front();
        }
        self.tail.push_back(text);
    }

    /// Folds a line into the digest without keeping it for the report (the final state dump).
    pub fn fold(&mut self, text: &str) {
        for b in text.as_bytes().iter().chain(b"\n") {
            self.hash ^= u64::from(*b);
            self.hash = self.hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.lines += 1;
    }

    /// The digest of every line so far.
    pub fn digest(&self) -> u64 {
        self.hash
    }

    /// How many lines were logged.
    pub fn len(&self) -> u64 {
        self.lines
    }

    /// Whether nothing was logged.
    pub fn is_empty(&self) -> bool {
        self.lines == 0
    }

    /// The latest lines, one per line.
    pub fn tail(&self) -> String {
        let mut out = String::new();
        for l in &self.tail {
            let _ = writeln!(out, "  {l}");
        }
        out
    }
}
