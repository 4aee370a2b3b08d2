//! Splitting a byte stream into log lines: on `\n`, with over-long lines cut at
//! [`MAX_LINE_BYTES`] (on a UTF-8 character boundary where there is one) and invalid UTF-8
//! replaced.
//!
//! Pure and synchronous: the process and HTTP executors feed it whatever bytes they read and
//! stamp the lines it hands back. It does no I/O and knows nothing of clocks.

/// Longest line kept whole; longer ones are split into several lines of at most this size.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Accumulates bytes and hands out complete lines.
#[derive(Debug)]
pub struct LineSplitter {
    /// Bytes of the line being assembled (never more than `max`).
    pending: Vec<u8>,
    /// The cut length for over-long lines.
    max: usize,
}

impl Default for LineSplitter {
    fn default() -> Self {
        LineSplitter::new(MAX_LINE_BYTES)
    }
}

impl LineSplitter {
    /// A splitter that cuts lines longer than `max` bytes (at least 4, so that a cut can
    /// always fall on a character boundary).
    pub fn new(max: usize) -> Self {
        LineSplitter {
            pending: Vec::new(),
            max: max.max(4),
        }
    }

    /// Feeds `data`; calls `emit` with each line completed by it (without its `\n`, and
    /// without a `\r` just before it).
    pub fn feed(&mut self, mut data: &[u8], mut emit: impl FnMut(String)) {
        while !data.is_empty() {
            let room = self.max - self.pending.len();
            // A newline right after `room` bytes still ends a line of exactly `max` bytes.
            let window = &data[..data.len().min(room + 1)];
            if let Some(i) = window.iter().position(|&b| b == b'\n') {
                self.pending.extend_from_slice(&data[..i]);
                data = &data[i + 1..];
                if self.pending.last() == Some(&b'\r') {
                    self.pending.pop();
                }
                emit(decode(std::mem::take(&mut self.pending)));
            } else if room == 0 {
                // Full, and the line goes on: cut it here.
                self.cut(&mut emit);
            } else {
                let n = data.len().min(room);
                self.pending.extend_from_slice(&data[..n]);
                data = &data[n..];
            }
        }
    }

    /// Ends the input: a last line without a newline is emitted too.
    pub fn finish(&mut self, mut emit: impl FnMut(String)) {
        if !self.pending.is_empty() {
            emit(decode(std::mem::take(&mut self.pending)));
        }
    }

    /// Emits a full `pending` as one line, keeping a trailing incomplete UTF-8 character
    /// for the next one.
    fn cut(&mut self, emit: &mut impl FnMut(String)) {
        let at = utf8_cut(&self.pending);
        let rest = self.pending.split_off(at);
        emit(decode(std::mem::replace(&mut self.pending, rest)));
    }
}

/// Where to cut `buf` so that an incomplete multi-byte character at its end moves to the
/// next piece. Returns `buf.len()` when the end is clean or the bytes are not UTF-8 anyway.
fn utf8_cut(buf: &[u8]) -> usize {
    let len = buf.len();
    // Look back at most 3 bytes for the lead byte of the last character.
    for back in 1..=3.min(len) {
        let b = buf[len - back];
        if b & 0b1100_0000 == 0b1000_0000 {
            continue; // continuation byte: keep looking for the lead
        }
        let width = match b {
            0x00..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf7 => 4,
            _ => return len,
        };
        return if width > back { len - back } else { len };
    }
    len
}

/// Bytes to text, replacing invalid UTF-8 (without copying when it is valid).
fn decode(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(max: usize, chunks: &[&[u8]]) -> Vec<String> {
        let mut out = Vec::new();
        let mut s = LineSplitter::new(max);
        for c in chunks {
            s.feed(c, |l| out.push(l));
        }
        s.finish(|l| out.push(l));
        out
    }

    #[test]
    fn splits_on_newlines_across_chunks() {
        assert_eq!(split(100, &[b"a\nb", b"c\r\n", b"\nd"]), ["a", "bc", "", "d"]);
    }

    #[test]
    fn cuts_long_lines_without_an_empty_line_after_an_exact_fit() {
        assert_eq!(split(4, &[b"abcdefghij\n"]), ["abcd", "efgh", "ij"]);
        assert_eq!(split(4, &[b"abcd\nef\n"]), ["abcd", "ef"]);
        assert_eq!(split(4, &[b"abcd", b"\n"]), ["abcd"]);
    }

    #[test]
    fn cut_keeps_multibyte_characters_whole() {
        // "aaé" is 4 bytes; "aaaé" is 5: the é moves to the next piece.
        assert_eq!(split(4, &["aaaéb\n".as_bytes()]), ["aaa", "éb"]);
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        assert_eq!(split(100, &[b"a\xffb\n"]), ["a\u{fffd}b"]);
    }

    #[test]
    fn nothing_in_nothing_out() {
        assert!(split(100, &[]).is_empty());
        assert_eq!(split(100, &[b"\n"]), [""]);
    }
}
