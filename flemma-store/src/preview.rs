//! Sizes and previews for `flemma.save_to` stubs.

/// `<n>B` below 1024, else one decimal with `KB`/`MB`/`GB` (1024-based): `12.1KB`, `1.2MB`.
///
/// ```
/// assert_eq!(flemma_store::format_size(512), "512B");
/// assert_eq!(flemma_store::format_size(12_390), "12.1KB");
/// assert_eq!(flemma_store::format_size(1_258_291), "1.2MB");
/// ```
pub fn format_size(bytes: usize) -> String {
    const UNITS: [&str; 3] = ["KB", "MB", "GB"];
    if bytes < 1024 {
        return format!("{bytes}B");
    }
    // Tenths of the unit, rounded half up, in integers.
    let mut unit = 0;
    let mut scale: u128 = 1024;
    while unit < UNITS.len() - 1 && (bytes as u128) >= scale * 1024 {
        unit += 1;
        scale *= 1024;
    }
    let tenths = ((bytes as u128) * 10 + scale / 2) / scale;
    format!("{}.{}{}", tenths / 10, tenths % 10, UNITS[unit])
}

/// The first whole lines of `content` within `max_lines` lines and `max_bytes` bytes
/// (newlines counted); nothing when the first line alone is too long.
pub(crate) fn head_preview(content: &str, max_lines: usize, max_bytes: usize) -> &str {
    let mut end = 0;
    for (count, line) in content.split('\n').enumerate() {
        if count >= max_lines {
            break;
        }
        let next = if count == 0 {
            line.len()
        } else {
            end + 1 + line.len()
        };
        if next > max_bytes {
            break;
        }
        end = next;
    }
    &content[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews_keep_whole_lines() {
        assert_eq!(head_preview("a\nbb\nccc", 2, 100), "a\nbb");
        assert_eq!(head_preview("a\nbb\nccc", 10, 4), "a\nbb");
        assert_eq!(head_preview("a\nbb\nccc", 10, 3), "a");
        assert_eq!(head_preview("toolong\nx", 10, 3), "");
        assert_eq!(head_preview("", 10, 3), "");
    }

    #[test]
    fn sizes() {
        assert_eq!(format_size(0), "0B");
        assert_eq!(format_size(1023), "1023B");
        assert_eq!(format_size(1024), "1.0KB");
        assert_eq!(format_size(51_200), "50.0KB");
        assert_eq!(format_size(3 * 1024 * 1024 * 1024), "3.0GB");
    }
}
