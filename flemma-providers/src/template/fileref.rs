//! `@./file` references in message text.

use std::borrow::Cow;

/// An `@./file` reference found in message text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileReference<'a> {
    /// The path, URL-decoded: `./a b.png`, `../x`, `/abs/path` (from `@//abs/path`), `~/x`.
    pub path: Cow<'a, str>,
    /// The `;type=<mime>` override.
    pub mime: Option<&'a str>,
    /// The reference as written, without trailing punctuation (`@./a.png;type=image/png`).
    pub written: &'a str,
    /// The transcript line the reference is on.
    pub line: u32,
}

/// A run of text or a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Chunk<'a> {
    Text(&'a str),
    Ref(FileReference<'a>),
}

/// Whether `text` holds a file reference.
pub(crate) fn has_reference(text: &str) -> bool {
    memchr::memchr_iter(b'@', text.as_bytes()).any(|at| reference_at(text, at).is_some())
}

/// Splits `text`, whose first line is `first_line`, into text and file references, in
/// order. Adjacent text is not merged, and text chunks are never empty.
#[cfg(test)]
pub(crate) fn split(text: &str, first_line: u32) -> Vec<Chunk<'_>> {
    let mut chunks = Vec::new();
    split_into(text, first_line, |chunk| chunks.push(chunk));
    chunks
}

/// [`split`], each chunk handed to `push` in order.
pub(crate) fn split_into<'a>(text: &'a str, first_line: u32, mut push: impl FnMut(Chunk<'a>)) {
    let mut text_start = 0;
    let mut search = 0;
    let (mut line, mut counted) = (first_line, 0);
    while let Some(found) = memchr::memchr(b'@', &text.as_bytes()[search..]) {
        let at = search + found;
        search = at + 1;
        let Some((mut reference, end)) = reference_at(text, at) else {
            continue;
        };
        line += memchr::memchr_iter(b'\n', &text.as_bytes()[counted..at]).count() as u32;
        counted = at;
        reference.line = line;
        if at > text_start {
            push(Chunk::Text(&text[text_start..at]));
        }
        push(Chunk::Ref(reference));
        text_start = end;
        search = end;
    }
    if text_start < text.len() {
        push(Chunk::Text(&text[text_start..]));
    }
}

/// The `@./file` reference of `text` that covers byte `offset` (a cursor on it, or just after
/// it), with the bytes it spans; its [`line`](FileReference::line) is `0`.
///
/// ```
/// let text = "See @./notes/a%20b.md, then @../x.png;type=image/png.";
/// let at = text.find("notes").unwrap();
/// let (reference, span) = flemma_providers::file_reference_at(text, at).unwrap();
/// assert_eq!(reference.path, "./notes/a b.md");
/// assert_eq!(&text[span], "@./notes/a%20b.md");
/// assert!(flemma_providers::file_reference_at(text, 1).is_none());
/// ```
pub fn file_reference_at(
    text: &str,
    offset: usize,
) -> Option<(FileReference<'_>, std::ops::Range<usize>)> {
    let offset = offset.min(text.len());
    let bytes = text.as_bytes();
    let token_start = bytes[..offset]
        .iter()
        .rposition(u8::is_ascii_whitespace)
        .map_or(0, |i| i + 1);
    let mut search = token_start;
    while let Some(found) = memchr::memchr(b'@', &bytes[search..offset.min(bytes.len())]) {
        let at = search + found;
        search = at + 1;
        if let Some((reference, end)) = reference_at(text, at)
            && offset <= end
        {
            return Some((reference, at..end));
        }
    }
    // The cursor on the `@` itself.
    if bytes.get(offset) == Some(&b'@')
        && let Some((reference, end)) = reference_at(text, offset)
    {
        return Some((reference, offset..end));
    }
    None
}

/// The reference whose `@` is at byte `at`, and the byte where it ends (trailing punctuation
/// excluded).
fn reference_at(text: &str, at: usize) -> Option<(FileReference<'_>, usize)> {
    let rest = &text[at + 1..];
    let token_len = rest
        .bytes()
        .position(|b| b.is_ascii_whitespace())
        .unwrap_or(rest.len());
    let token = &rest[..token_len];
    let prefix_len = if token.starts_with("./") {
        2
    } else if token.starts_with("../") {
        3
    } else if token.starts_with("//") || token.starts_with("~/") {
        2
    } else {
        return None;
    };
    if token.len() <= prefix_len {
        return None;
    }
    let (path, mime) = match type_at(token) {
        Some(i) => (&token[..i], Some(&token[i + ";type=".len()..])),
        None => (token, None),
    };
    let strip = |s: &str| s.trim_end_matches(|c: char| c.is_ascii_punctuation()).len();
    let (path, mime, kept) = if let Some(mime) = mime {
        let mime = &mime[..strip(mime)];
        let kept = path.len() + ";type=".len() + mime.len();
        (path, (!mime.is_empty()).then_some(mime), kept)
    } else {
        let path = &path[..strip(path)];
        (path, None, path.len())
    };
    // `@./` or `@../.` alone names no file.
    if !path.bytes().any(|b| b != b'.' && b != b'/' && b != b'~') {
        return None;
    }
    let path = if token.starts_with("//") {
        &path[1..]
    } else {
        path
    };
    let reference = FileReference {
        path: url_decode(path),
        mime,
        written: &text[at..at + 1 + kept],
        line: 0,
    };
    Some((reference, at + 1 + kept))
}

/// Where `;type=` starts in `token` (`str::find` without its searcher's set-up).
fn type_at(token: &str) -> Option<usize> {
    memchr::memchr_iter(b';', token.as_bytes()).find(|&at| token[at..].starts_with(";type="))
}

/// Decodes `%XX` escapes; the text as is when it has none or they do not decode to UTF-8.
fn url_decode(path: &str) -> Cow<'_, str> {
    if !path.contains('%') {
        return Cow::Borrowed(path);
    }
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_or(Cow::Borrowed(path), Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(text: &str) -> Vec<(String, Option<&str>, &str)> {
        split(text, 1)
            .into_iter()
            .filter_map(|c| match c {
                Chunk::Ref(r) => Some((r.path.into_owned(), r.mime, r.written)),
                Chunk::Text(_) => None,
            })
            .collect()
    }

    #[test]
    fn finds_each_form() {
        assert_eq!(
            refs("See @./a.txt, @../b.md and @~/c.png; also @//etc/hosts."),
            vec![
                ("./a.txt".into(), None, "@./a.txt"),
                ("../b.md".into(), None, "@../b.md"),
                ("~/c.png".into(), None, "@~/c.png"),
                ("/etc/hosts".into(), None, "@//etc/hosts"),
            ]
        );
    }

    #[test]
    fn mime_override_and_trailing_punctuation() {
        assert_eq!(
            refs("(@./img/x;type=image/png)."),
            vec![(
                "./img/x".into(),
                Some("image/png"),
                "@./img/x;type=image/png"
            )]
        );
        let chunks = split("Read @./a.txt!", 1);
        assert_eq!(chunks.last(), Some(&Chunk::Text("!")));
        assert_eq!(chunks.first(), Some(&Chunk::Text("Read ")));
    }

    #[test]
    fn references_know_their_line() {
        let lines: Vec<u32> = split("@./a\nx\n\ny @./b @./c\n@./d", 7)
            .into_iter()
            .filter_map(|c| match c {
                Chunk::Ref(r) => Some(r.line),
                Chunk::Text(_) => None,
            })
            .collect();
        assert_eq!(lines, [7, 10, 10, 11]);
    }

    #[test]
    fn url_decoding() {
        assert_eq!(refs("@./my%20file.txt")[0].0, "./my file.txt");
        assert_eq!(refs("@./100%zz")[0].0, "./100%zz");
        // Escapes that do not decode to UTF-8 are kept.
        assert_eq!(refs("@./x%ff")[0].0, "./x%ff");
    }

    #[test]
    fn not_references() {
        for text in [
            "mail me@example.com",
            "@./ alone",
            "@../...",
            "@/single/slash",
            "@ ./space",
            "@",
        ] {
            assert_eq!(refs(text), vec![], "{text}");
            assert_eq!(split(text, 1), vec![Chunk::Text(text)], "{text}");
        }
        assert_eq!(split("", 1), vec![]);
    }

    #[test]
    fn chunks_cover_the_text() {
        let text = "a @./x.rs b\n@~/y.\n@./z;type=text/plain";
        let joined: String = split(text, 1)
            .iter()
            .map(|c| match c {
                Chunk::Text(t) => *t,
                Chunk::Ref(r) => r.written,
            })
            .collect();
        assert_eq!(joined, text);
    }

    proptest::proptest! {
        /// Text and references always cover the input exactly, text chunks are never empty,
        /// and `has_reference` agrees with `split`.
        #[test]
        fn chunks_cover_any_text(text in "[a-z@./~;=%!,\\- \n\u{e9}]{0,60}") {
            let chunks = split(&text, 1);
            let joined: String = chunks
                .iter()
                .map(|c| match c {
                    Chunk::Text(t) => *t,
                    Chunk::Ref(r) => r.written,
                })
                .collect();
            proptest::prop_assert_eq!(&joined, &text);
            proptest::prop_assert!(chunks.iter().all(|c| !matches!(c, Chunk::Text(""))));
            proptest::prop_assert_eq!(
                has_reference(&text),
                chunks.iter().any(|c| matches!(c, Chunk::Ref(_)))
            );
        }
    }
}
