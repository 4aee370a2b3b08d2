//! The CloudWatch form of a log record: the shared record format of
//! [`sked_core::log_record`], and [`encode_within`], which cuts a record to CloudWatch's event
//! size limit.

pub use sked_core::log_record::{decode, encode, encode_marker, marker_text};
use sked_core::ports::LogLine;

/// `line` as one record of at most `max` bytes: the text is cut (at a character boundary)
/// until the record fits. CloudWatch refuses events over 256 KiB; the S3 object keeps the
/// whole line.
pub fn encode_within(line: &LogLine, max: usize) -> String {
    let text = encode(line);
    if text.len() <= max {
        return text;
    }
    // JSON escaping can make the record longer than the text; cut until it fits.
    let mut keep = line.line.len().min(max);
    loop {
        while !line.line.is_char_boundary(keep) {
            keep -= 1;
        }
        let cut = LogLine {
            line: format!("{}…", &line.line[..keep]),
            ..line.clone()
        };
        let text = encode(&cut);
        if text.len() <= max || keep == 0 {
            return text;
        }
        keep = keep.saturating_sub((text.len() - max).max(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sked_core::ports::LogStream;
    use sked_core::timestamp;

    #[test]
    fn long_lines_are_cut_to_fit_and_stay_records() {
        let ts = timestamp::parse("2026-12-01T09:00:00Z").unwrap();
        for text in ["x".repeat(5000), "é\"\n".repeat(2000), "short".into()] {
            let line = LogLine {
                ts,
                stream: LogStream::Stdout,
                line: text.clone(),
            };
            let record = encode_within(&line, 1000);
            assert!(record.len() <= 1000, "{} bytes", record.len());
            let (back, marker) = decode(record.as_bytes()).unwrap();
            assert!(!marker);
            if text.len() < 900 {
                assert_eq!(back.line, text);
            } else {
                assert!(back.line.ends_with('…'));
                assert!(text.starts_with(back.line.trim_end_matches('…')));
            }
        }
    }
}
