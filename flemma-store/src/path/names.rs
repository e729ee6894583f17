//! The last steps of a store path: `.` and `..` folded, the `flemma` namespaces
//! collapsed, the tool name de-duplicated, segments shortened to what file systems take.

use std::path::{Path, PathBuf};

/// Removes `.` segments and folds `..` lexically ([`flemma_config::fold_path`]: a relative
/// path stays relative, leading `..` are kept; `/..` is `/`).
pub(crate) fn normalize(path: &str) -> PathBuf {
    flemma_config::fold_path(Path::new(path))
}

/// Steps 4-6 of the pipeline on one string: normalize (`.` dropped, `..` folded), collapse the
/// namespaces, de-duplicate the name; one allocation for the result.
pub(super) fn finish(path: &str, name: &str) -> PathBuf {
    let absolute = path.starts_with('/');
    let mut segments: Vec<&str> = Vec::with_capacity(16);
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => match segments.last() {
                Some(&last) if last != ".." => {
                    segments.pop();
                }
                _ if absolute => {}
                _ => segments.push(".."),
            },
            other => segments.push(other),
        }
    }
    let mut out = String::with_capacity(path.len());
    if absolute {
        out.push('/');
    }
    let mut previous_is_namespace = false;
    let mut first = true;
    let count = segments.len();
    for (i, segment) in segments.into_iter().enumerate() {
        if segment == "flemma" && previous_is_namespace {
            continue;
        }
        previous_is_namespace = segment == "flemma" || segment == ".flemma";
        if !first {
            out.push('/');
        }
        first = false;
        // The file name leaves room for the writer's derived names; a directory whose name
        // is longer than NAME_MAX could not exist, so shortening it changes no real path.
        let limit = if i + 1 == count {
            MAX_FILE_NAME
        } else {
            NAME_MAX
        };
        if name.is_empty() || !segment.contains(name) {
            out.push_str(&shorten(segment, limit));
            continue;
        }
        let mut current = segment.to_owned();
        while let Some(next) = dedupe_once(&current, name) {
            current = next;
        }
        out.push_str(&shorten(&current, limit));
    }
    PathBuf::from(out)
}

/// The most bytes a file name may have on the file systems the store runs on (`NAME_MAX`).
const NAME_MAX: usize = 255;

/// The longest store file name a rendered path keeps: `NAME_MAX` (255 bytes) less room for the names
/// the writer derives from it, the temporary `.<name>.<pid>.<n>.tmp` (37 bytes more at most)
/// and a `version` backup's `<stem>.<n>.<ext>` (11 more). Longer names are shortened by
/// [`shorten`].
pub const MAX_FILE_NAME: usize = 200;

/// The longest extension [`shorten`] keeps as such (`.txt`); a longer tail is part of the stem.
const MAX_EXTENSION: usize = 16;

/// A path segment of at most `limit` bytes: the segment itself when it fits, else a readable
/// prefix of it, `-`, the 16 hex digits of the FNV-1a hash of the whole segment, and its
/// extension (`tool_bash_toolu_aaaa…-1f2e3d4c5b6a7988.txt`).
///
/// Deterministic, so that every lookup of an id renders the same name; two segments that
/// differ anywhere (past the prefix too) get different hashes.
pub fn shorten(segment: &str, limit: usize) -> std::borrow::Cow<'_, str> {
    if segment.len() <= limit {
        return std::borrow::Cow::Borrowed(segment);
    }
    let extension = segment
        .rfind('.')
        .filter(|&dot| dot > 0 && segment.len() - dot <= MAX_EXTENSION)
        .map_or("", |dot| &segment[dot..]);
    let hash = format!("-{:016x}", fnv1a(segment.as_bytes()));
    let mut end = limit.saturating_sub(hash.len() + extension.len());
    while !segment.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}{hash}{extension}", &segment[..end]))
}

/// FNV-1a, 64 bits: stable across processes, platforms and Rust versions, unlike
/// `DefaultHasher`.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Drops a `flemma` segment that directly follows a kept `flemma` or `.flemma` segment, to a
/// fixed point (`/x/.flemma/flemma/y` → `/x/.flemma/y`).
pub fn collapse_namespaces(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    let mut previous_is_namespace = false;
    for component in path.components() {
        let text = component.as_os_str();
        if text == "flemma" && previous_is_namespace {
            continue;
        }
        previous_is_namespace = text == "flemma" || text == ".flemma";
        out.push(text);
    }
    out
}

/// Inside each segment, reduces `<name><sep><name>` (one non-alphanumeric separator, bounded
/// by non-alphanumerics or the segment's edges) to `<name>`, to a fixed point.
pub fn dedupe_name(path: &Path, name: &str) -> PathBuf {
    path.components()
        .map(|c| {
            let segment = c.as_os_str().to_string_lossy();
            let mut current = segment.into_owned();
            while let Some(next) = dedupe_once(&current, name) {
                current = next;
            }
            current
        })
        .collect()
}

fn dedupe_once(segment: &str, name: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let boundary =
        |i: Option<usize>| i.is_none_or(|i| i >= bytes.len() || !bytes[i].is_ascii_alphanumeric());
    let mut from = 0;
    while let Some(found) = segment[from..].find(name) {
        let start = from + found;
        let sep = start + name.len();
        let second = sep + 1;
        if boundary(start.checked_sub(1))
            && sep < bytes.len()
            && !bytes[sep].is_ascii_alphanumeric()
            && segment.is_char_boundary(second)
            && segment[second..].starts_with(name)
            && boundary(Some(second + name.len()))
        {
            return Some(format!(
                "{}{}",
                &segment[..sep],
                &segment[second + name.len()..]
            ));
        }
        from = start + 1;
        while !segment.is_char_boundary(from) {
            from += 1;
        }
    }
    None
}
