//! The hand-written line scanner the parser runs.
//!
//! Each function accepts exactly the lines its rule in `grammar.pest` accepts and extracts the
//! same parts; the tests check this against [`crate::grammar`] on fixtures and generated lines.

/// Lua's `%s`: the grammar's `ws`.
pub(crate) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | 0x0B | 0x0C | b'\r' | b'\n')
}

/// Whether the line is whitespace only.
pub(crate) fn is_blank(line: &str) -> bool {
    line.bytes().all(is_space)
}

fn skip_space(s: &str) -> &str {
    let n = s.bytes().take_while(|&b| is_space(b)).count();
    &s[n..]
}

fn trim_end_space(s: &str) -> &str {
    let n = s.bytes().rev().take_while(|&b| is_space(b)).count();
    &s[..s.len() - n]
}

fn alnum_prefix_len(s: &str) -> usize {
    s.bytes().take_while(u8::is_ascii_alphanumeric).count()
}

/// `@Role:` → the role word.
pub(crate) fn role_marker(line: &str) -> Option<&str> {
    let rest = line.strip_prefix('@')?;
    let n = alnum_prefix_len(rest);
    (n > 0 && rest[n..].strip_prefix(':').is_some_and(is_blank)).then(|| &rest[..n])
}

/// ```` ```lua ```` on line 1 → the language word.
pub(crate) fn frontmatter_open(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("```")?;
    let n = alnum_prefix_len(rest);
    (n > 0 && is_blank(&rest[n..])).then(|| &rest[..n])
}

/// ```` ``` ```` closing the frontmatter.
pub(crate) fn is_frontmatter_close(line: &str) -> bool {
    line.strip_prefix("```").is_some_and(is_blank)
}

/// ``**Tool Use:** `name` (`id`)`` → (name, id).
pub(crate) fn tool_use_header(line: &str) -> Option<(&str, &str)> {
    let after = skip_space(line.strip_prefix("**Tool Use:**")?).strip_prefix('`')?;
    let name_len = after.find('`').filter(|&n| n > 0)?;
    let rest = skip_space(&after[name_len + 1..]).strip_prefix("(`")?;
    // The id runs to the first `)`, which must follow a backtick.
    let close = rest.find(')')?;
    let id = rest[..close]
        .strip_suffix('`')
        .filter(|id| !id.is_empty())?;
    Some((&after[..name_len], id))
}

/// Which result header a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResultKind {
    Tool,
    Job,
}

/// A `**Tool Result:**` or `**Job Result:**` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ResultHeader<'a> {
    pub(crate) kind: ResultKind,
    pub(crate) id: &'a str,
    /// The text inside the suffix parentheses, when the rest of the line is a suffix.
    pub(crate) modeline: Option<&'a str>,
}

/// Reads a result header of either kind.
pub(crate) fn result_header(line: &str) -> Option<ResultHeader<'_>> {
    let (kind, rest) = if let Some(rest) = line.strip_prefix("**Job Result:**") {
        (ResultKind::Job, rest)
    } else {
        (ResultKind::Tool, line.strip_prefix("**Tool Result:**")?)
    };
    let rest = skip_space(rest).strip_prefix('`')?;
    let id_len = rest.find('`').filter(|&n| n > 0)?;
    let suffix = trim_end_space(skip_space(&rest[id_len + 1..]));
    let modeline = suffix.strip_prefix('(').and_then(|s| s.strip_suffix(')'));
    Some(ResultHeader {
        kind,
        id: &rest[..id_len],
        modeline,
    })
}

/// A `**Compaction:**` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CompactionHeader<'a> {
    /// The text inside the suffix parentheses, when the rest of the line is a suffix.
    pub(crate) modeline: Option<&'a str>,
}

/// Reads a `**Compaction:** (modeline)` header.
pub(crate) fn compaction_header(line: &str) -> Option<CompactionHeader<'_>> {
    let rest = line.strip_prefix("**Compaction:**")?;
    let suffix = trim_end_space(skip_space(rest));
    Some(CompactionHeader {
        modeline: suffix.strip_prefix('(').and_then(|s| s.strip_suffix(')')),
    })
}

/// A thinking tag line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ThinkingTag<'a> {
    /// `<thinking>`, `<thinking redacted>` or `<thinking p:signature="…">`.
    Open {
        redacted: bool,
        signature: Option<(&'a str, &'a str)>,
    },
    /// `<thinking p:signature="…"/>`.
    SelfClosing { signature: (&'a str, &'a str) },
    /// `</thinking>`.
    Close,
}

/// `provider:signature="value"` at the start of `s` → ((provider, value), rest).
fn signature(s: &str) -> Option<((&str, &str), &str)> {
    let n = alnum_prefix_len(s);
    if n == 0 {
        return None;
    }
    let value = s[n..].strip_prefix(":signature=\"")?;
    let end = value.find('"')?;
    Some(((&s[..n], &value[..end]), &value[end + 1..]))
}

/// Whether `s` is `ws* <tag> ws*`.
fn ends_with_tag(s: &str, tag: &str) -> bool {
    skip_space(s).strip_prefix(tag).is_some_and(is_blank)
}

/// Reads a thinking tag.
pub(crate) fn thinking_tag(line: &str) -> Option<ThinkingTag<'_>> {
    if line.strip_prefix("</thinking>").is_some_and(is_blank) {
        return Some(ThinkingTag::Close);
    }
    let rest = line.strip_prefix("<thinking")?;
    thinking_open(rest).or_else(|| thinking_self_closing(rest))
}

/// `(ws+ (redacted | signature))? ws* ">" ws*`, the grammar's ordered choice included.
fn thinking_open(rest: &str) -> Option<ThinkingTag<'_>> {
    let after = skip_space(rest);
    let (redacted, signature, tail) = match after.strip_prefix("redacted") {
        Some(tail) if after.len() < rest.len() => (true, None, tail),
        _ => match signature(after).filter(|_| after.len() < rest.len()) {
            Some((sig, tail)) => (false, Some(sig), tail),
            None => (false, None, rest),
        },
    };
    ends_with_tag(tail, ">").then_some(ThinkingTag::Open {
        redacted,
        signature,
    })
}

/// `ws+ signature ws* "/>" ws*`.
fn thinking_self_closing(rest: &str) -> Option<ThinkingTag<'_>> {
    let after = skip_space(rest);
    if after.len() == rest.len() {
        return None;
    }
    let (signature, tail) = signature(after)?;
    ends_with_tag(tail, "/>").then_some(ThinkingTag::SelfClosing { signature })
}

/// `<!-- flemma:aborted: MESSAGE -->` → the trimmed message.
pub(crate) fn abort_marker(line: &str) -> Option<&str> {
    let rest = skip_space(line.strip_prefix("<!--")?);
    let body = skip_space(rest.strip_prefix("flemma:aborted:")?).strip_suffix("-->")?;
    Some(trim_end_space(body))
}

/// A line opening a fenced block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FenceOpen<'a> {
    /// Number of backticks.
    pub(crate) ticks: usize,
    /// The language token (may be empty).
    pub(crate) language: &'a str,
    /// Everything after the language token.
    pub(crate) rest: &'a str,
}

impl<'a> FenceOpen<'a> {
    /// Whether the message segmenter treats the line as a fence.
    pub(crate) fn opens_message_fence(&self) -> bool {
        self.ticks >= 3 && !self.rest.contains('`')
    }

    /// The info string: the rest after the language token, when it starts with whitespace.
    pub(crate) fn info(&self) -> Option<&'a str> {
        let first = *self.rest.as_bytes().first()?;
        if !is_space(first) {
            return None;
        }
        let info = skip_space(self.rest);
        (!info.is_empty()).then_some(info)
    }

    /// The rest when it follows the language token without whitespace (`json**x**`).
    pub(crate) fn glued(&self) -> Option<&'a str> {
        let first = *self.rest.as_bytes().first()?;
        (!is_space(first)).then_some(self.rest)
    }
}

/// Reads a fence opener (any line starting with a backtick).
pub(crate) fn fence_open(line: &str) -> Option<FenceOpen<'_>> {
    let ticks = line.bytes().take_while(|&b| b == b'`').count();
    if ticks == 0 {
        return None;
    }
    let after = &line[ticks..];
    let n = after
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b':' | b'.' | b'_' | b'-'))
        .count();
    Some(FenceOpen {
        ticks,
        language: &after[..n],
        rest: &after[n..],
    })
}

/// Number of backticks the line starts with.
pub(crate) fn leading_ticks(line: &str) -> usize {
    line.bytes().take_while(|&b| b == b'`').count()
}

/// One line through the message segmenter: the message-level fence open after it
/// (its backticks, 0 for none) given the one open before it (`fence`), and whether the line is a
/// role marker outside a fence (which starts the next message).
pub(crate) fn message_fence(fence: u32, text: &str) -> (u32, bool) {
    match text.as_bytes().first() {
        Some(b'`') if fence > 0 => {
            if closes_fence(text, fence as usize) {
                (0, false)
            } else {
                (fence, false)
            }
        }
        Some(b'`') => {
            let opened = fence_open(text)
                .filter(FenceOpen::opens_message_fence)
                .map_or(0, |f| u32::try_from(f.ticks).unwrap_or(u32::MAX));
            (opened, false)
        }
        Some(b'@') if fence == 0 => (0, role_marker(text).is_some()),
        _ => (fence, false),
    }
}

/// Whether the line closes a fence opened with `min_ticks` backticks.
pub(crate) fn closes_fence(line: &str, min_ticks: usize) -> bool {
    let ticks = leading_ticks(line);
    ticks >= min_ticks.max(1) && is_blank(&line[ticks..])
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar;
    use proptest::prelude::*;

    /// Asserts that every scanner function agrees with the pest grammar on `line`.
    fn agrees(line: &str) {
        assert_eq!(
            role_marker(line),
            grammar::role_marker(line),
            "role_marker {line:?}"
        );
        assert_eq!(
            frontmatter_open(line),
            grammar::frontmatter_open(line),
            "frontmatter_open {line:?}"
        );
        assert_eq!(
            is_frontmatter_close(line),
            grammar::is_frontmatter_close(line),
            "frontmatter_close {line:?}"
        );
        assert_eq!(
            tool_use_header(line),
            grammar::tool_use_header(line),
            "tool_use_header {line:?}"
        );
        assert_eq!(
            result_header(line),
            grammar::result_header(line),
            "result_header {line:?}"
        );
        assert_eq!(
            compaction_header(line),
            grammar::compaction_header(line),
            "compaction_header {line:?}"
        );
        assert_eq!(
            thinking_tag(line),
            grammar::thinking_tag(line),
            "thinking_tag {line:?}"
        );
        assert_eq!(
            abort_marker(line),
            grammar::abort_marker(line),
            "abort_marker {line:?}"
        );
        assert_eq!(
            fence_open(line),
            grammar::fence_open(line),
            "fence_open {line:?}"
        );
        for min in 1..6 {
            assert_eq!(
                closes_fence(line, min),
                grammar::closes_fence(line, min),
                "closes_fence {min} {line:?}"
            );
        }
    }

    /// Pieces that line constructs are made of, so generated lines hit the rules' edges.
    const PIECES: &[&str] = &[
        "@",
        "You",
        "Assistant",
        ":",
        " ",
        "\t",
        "\u{0B}",
        "\r",
        "`",
        "```",
        "````",
        "json",
        "lua",
        "x-y.z:w",
        "**Tool Use:**",
        "**Tool Result:**",
        "**Job Result:**",
        "**Compaction:**",
        "messages=4",
        "(",
        ")",
        "(`",
        "`)",
        "<thinking",
        "</thinking>",
        "<thinking>",
        "redacted",
        "anthropic",
        ":signature=\"",
        "\"",
        ">",
        "/>",
        "<!--",
        "flemma:aborted:",
        "-->",
        "-",
        "--",
        "=",
        "job=j",
        "pending",
        "é",
        "a",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn scanner_agrees_with_grammar_on_built_lines(
            parts in proptest::collection::vec(proptest::sample::select(PIECES), 0..10)
        ) {
            agrees(&parts.concat());
        }

        #[test]
        fn scanner_agrees_with_grammar_on_arbitrary_lines(line in "[^\n]{0,40}") {
            agrees(&line);
        }
    }

    #[test]
    fn scanner_agrees_with_grammar_on_every_peer_fixture_line() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/peer");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "chat") {
                for line in std::fs::read_to_string(&path).unwrap().lines() {
                    agrees(line);
                    checked += 1;
                }
            }
        }
        assert!(
            checked > 300,
            "only {checked} fixture lines found in {}",
            dir.display()
        );
    }

    #[test]
    fn scanner_agrees_with_grammar_on_tricky_lines() {
        for line in [
            "<thinking redactedfoo:signature=\"x\"/>",
            "<thinking redacted x>",
            "<thinking   >",
            "<thinking a:signature=\"\">",
            "<!-- flemma:aborted:-->-->",
            "<!-- flemma:aborted: --> ",
            "**Tool Result:** `a` ( (x) )  ",
            "**Tool Result:** `a` (",
            "**Tool Result:** `a`()",
            "**Tool Use:** `a` (`b`c`)",
            "**Tool Use:**`a`(`b`)rest",
            "**Compaction:**",
            "**Compaction:** (messages=3 tokens=12000)  ",
            "**Compaction:**(a) (b)",
            "**Compaction:** x (a)",
            "**Compaction:** ( )",
            "@You:\u{0B}",
            "``` \t",
            "```lua\r",
        ] {
            agrees(line);
        }
    }

    #[test]
    fn role_markers() {
        assert_eq!(role_marker("@You:"), Some("You"));
        assert_eq!(role_marker("@Assistant:  \t"), Some("Assistant"));
        assert_eq!(role_marker("@You: hi"), None);
        assert_eq!(role_marker(" @You:"), None);
        assert_eq!(role_marker("@:"), None);
        assert_eq!(role_marker("@Yo-u:"), None);
    }

    #[test]
    fn tool_use_headers() {
        assert_eq!(
            tool_use_header("**Tool Use:** `bash` (`toolu_01`)"),
            Some(("bash", "toolu_01"))
        );
        assert_eq!(
            tool_use_header("**Tool Use:**`a.b`(`urn:x:1`) trailing"),
            Some(("a.b", "urn:x:1"))
        );
        assert_eq!(tool_use_header("**Tool Use:** `bash` (`a)b`)"), None);
        assert_eq!(
            tool_use_header("**Tool Use:** `bash` (`a`b`)"),
            Some(("bash", "a`b"))
        );
        assert_eq!(
            tool_use_header("**Tool Use:** `bash` (`a``)"),
            Some(("bash", "a`"))
        );
        assert_eq!(tool_use_header("**Tool Use:** `bash` (``)"), None);
        assert_eq!(tool_use_header("**Tool Use:** `` (`x`)"), None);
    }

    #[test]
    fn result_headers() {
        let h = result_header("**Tool Result:** `t1` (error job=job_1)  ").unwrap();
        assert_eq!(h.kind, ResultKind::Tool);
        assert_eq!(h.id, "t1");
        assert_eq!(h.modeline, Some("error job=job_1"));
        let h = result_header("**Tool Result:** `t1` trailing (x)").unwrap();
        assert_eq!(h.modeline, None);
        let h = result_header("**Job Result:** `job_1` (a (b) c)").unwrap();
        assert_eq!((h.kind, h.modeline), (ResultKind::Job, Some("a (b) c")));
        assert_eq!(result_header("**Tool Result:** ``"), None);
    }

    #[test]
    fn compaction_headers() {
        let modeline = |line| compaction_header(line).map(|h| h.modeline);
        assert_eq!(modeline("**Compaction:**"), Some(None));
        assert_eq!(
            modeline("**Compaction:** (messages=3 tokens=12000) "),
            Some(Some("messages=3 tokens=12000"))
        );
        assert_eq!(modeline("**Compaction:** summary (x)"), Some(None));
        assert_eq!(compaction_header(" **Compaction:**"), None);
        assert_eq!(compaction_header("**Compaction**"), None);
    }

    #[test]
    fn thinking_tags() {
        assert_eq!(
            thinking_tag("<thinking>"),
            Some(ThinkingTag::Open {
                redacted: false,
                signature: None
            })
        );
        assert_eq!(
            thinking_tag("<thinking redacted>"),
            Some(ThinkingTag::Open {
                redacted: true,
                signature: None
            })
        );
        assert_eq!(
            thinking_tag("<thinking anthropic:signature=\"a+b/=\" >"),
            Some(ThinkingTag::Open {
                redacted: false,
                signature: Some(("anthropic", "a+b/="))
            })
        );
        assert_eq!(
            thinking_tag("<thinking vertex:signature=\"s\" />"),
            Some(ThinkingTag::SelfClosing {
                signature: ("vertex", "s")
            })
        );
        assert_eq!(thinking_tag("</thinking>"), Some(ThinkingTag::Close));
        assert_eq!(thinking_tag("<thinking>x"), None);
        assert_eq!(thinking_tag("<thinkingx>"), None);
    }

    #[test]
    fn abort_markers() {
        assert_eq!(
            abort_marker("<!-- flemma:aborted: Response interrupted by the user. -->"),
            Some("Response interrupted by the user.")
        );
        assert_eq!(abort_marker("<!--flemma:aborted:-->"), Some(""));
        assert_eq!(
            abort_marker("<!-- flemma:aborted: a --> b -->"),
            Some("a --> b")
        );
        assert_eq!(abort_marker("<!-- other -->"), None);
    }

    #[test]
    fn fences() {
        let f = fence_open("````json  info here").unwrap();
        assert_eq!(
            (f.ticks, f.language, f.info()),
            (4, "json", Some("info here"))
        );
        assert!(f.opens_message_fence());
        let f = fence_open("```a`b").unwrap();
        assert!(!f.opens_message_fence());
        assert_eq!(fence_open("``x").unwrap().ticks, 2);
        assert!(closes_fence("````  ", 3));
        assert!(!closes_fence("``", 3));
        assert!(!closes_fence("``` x", 3));
        assert_eq!(frontmatter_open("```lua "), Some("lua"));
        assert_eq!(frontmatter_open("````lua"), None);
        assert!(is_frontmatter_close("```"));
        assert!(!is_frontmatter_close("````"));
    }
}
