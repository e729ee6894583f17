//! Templates in prompts: `{{ … }}` / `{% … %}` segments and `@./file` references.
//!
//! When a prompt is built, the text of `@System:` and `@You:` messages (and the results of
//! tools that declare `emits_template`) goes through a [`TemplateEngine`]. The parser has
//! already split the text into text, expression and code segments; the builder turns them
//! into [`TemplatePiece`]s (trim dashes applied, `@./file` references split out) and the
//! engine renders the pieces in a [`Scope`]: `__filename`, `__dirname`, the frontmatter's
//! variables and `include()`.
//!
//! Two engines ship: [`MiniJinjaEngine`] (the default; expressions are Jinja) and, with the
//! `lua` feature, `LuaEngine` (expressions are Lua, as the reference implementation writes
//! them). An engine only renders text: a file part (an image, a PDF) travels through the
//! rendered text as a marker that [`Scope::include_file`] hands out and the builder turns
//! back into a [`Part::File`](crate::Part::File).

mod access;
mod error;
mod file;
mod fileref;
pub(crate) mod jinja;
mod limits;
#[cfg(feature = "lua")]
pub(crate) mod lua;
mod scope;

use std::fmt;

use flemma_ast::Segment;

pub use access::FileAccess;
pub use error::TemplateError;
pub use file::{FilePart, detect_mime};
pub use fileref::{FileReference, file_reference_at};
pub use limits::MAX_FILE_BYTES;
pub use scope::Scope;

use fileref::Chunk;

/// Opens the marker of a file part in rendered text.
const MARKER_OPEN: &str = "\u{E000}flemma-file:";
/// Closes the marker of a file part.
const MARKER_CLOSE: char = '\u{E001}';

/// Evaluates templates when a prompt is built.
///
/// An engine renders a sequence of [`TemplatePiece`]s into text: text pieces as they are,
/// each expression's value, code run for its effect (code may wrap the pieces after it, as
/// `{% if x %}` … `{% endif %}` does), and each file reference as the text
/// [`Scope::reference`] returns. Scope gives the variables and `include()`.
///
/// ```
/// use std::sync::Arc;
/// use flemma_providers::{Scope, TemplateEngine, TemplateError, TemplatePiece};
///
/// /// An engine that knows one expression: `upper`.
/// #[derive(Debug)]
/// struct Shouting;
///
/// impl TemplateEngine for Shouting {
///     fn render(&self, pieces: &[TemplatePiece<'_>], scope: &Scope) -> Result<String, TemplateError> {
///         let mut out = String::new();
///         for piece in pieces {
///             match piece {
///                 TemplatePiece::Text(text) => out.push_str(text),
///                 TemplatePiece::Expression { code, line } if code.trim() == "upper" => out.push_str("HEY"),
///                 TemplatePiece::File(reference) => out.push_str(&scope.reference(reference)),
///                 TemplatePiece::Expression { line, .. } | TemplatePiece::Code { line, .. } => {
///                     return Err(TemplateError::render(Some(*line), "only `upper` is known"));
///                 }
///             }
///         }
///         Ok(out)
///     }
/// }
///
/// let doc = flemma_ast::parse("@You:\n{{ upper }}!\n");
/// let prompt = flemma_providers::PromptBuilder::new().engine(Arc::new(Shouting)).build(&doc);
/// assert_eq!(prompt.messages[0].parts, vec![flemma_providers::Part::Text { text: "HEY!".into() }]);
/// ```
pub trait TemplateEngine: fmt::Debug + Send + Sync {
    /// Renders `pieces` in `scope`.
    ///
    /// # Errors
    ///
    /// A [`TemplateError`] when the template does not compile or fails to evaluate; errors
    /// from [`Scope::include`] are passed on.
    fn render(&self, pieces: &[TemplatePiece<'_>], scope: &Scope) -> Result<String, TemplateError>;
}

/// A piece of a template, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplatePiece<'a> {
    /// Text, emitted as it is (trim dashes are already applied).
    Text(&'a str),
    /// `{{ code }}`: the value of `code` is emitted.
    Expression {
        /// The code between the delimiters, without trim dashes.
        code: &'a str,
        /// The line of the opening delimiter.
        line: u32,
    },
    /// `{% code %}`: `code` runs; it may wrap the pieces after it.
    Code {
        /// The code between the delimiters, without trim dashes.
        code: &'a str,
        /// The line of the opening delimiter.
        line: u32,
    },
    /// An `@./file` reference; emit [`Scope::reference`] of it.
    File(FileReference<'a>),
}

/// How an engine writes each kind of piece into its program (see [`Program::generate`]).
pub(crate) trait Syntax {
    /// Text number `index` (0-based) of the program's texts.
    fn text(out: &mut String, index: usize);
    /// File reference number `index` (0-based).
    fn file(out: &mut String, index: usize);
    /// `lines` line breaks that emit nothing.
    fn pad(out: &mut String, lines: usize);
    /// An expression whose value is emitted.
    fn expression(out: &mut String, code: &str);
    /// A statement.
    fn code(out: &mut String, code: &str);
}

/// An engine's program for some pieces: the source, whose first line is `first_line` of the
/// transcript (padding keeps every piece of code on its own line, so the engine's line
/// numbers map back), with the texts and file references it looks up by index. Texts are
/// looked up rather than written into the source, so nothing in them is read as code.
pub(crate) struct Program {
    pub(crate) source: String,
    pub(crate) texts: Vec<String>,
    pub(crate) references: Vec<OwnedReference>,
    pub(crate) first_line: u32,
}

impl Program {
    pub(crate) fn generate<S: Syntax>(pieces: &[TemplatePiece<'_>], prelude: &str) -> Self {
        let first_line = pieces
            .iter()
            .find_map(|piece| match piece {
                TemplatePiece::Expression { line, .. } | TemplatePiece::Code { line, .. } => {
                    Some(*line)
                }
                _ => None,
            })
            .unwrap_or(1);
        let mut program = Program {
            source: prelude.to_owned(),
            texts: Vec::new(),
            references: Vec::new(),
            first_line,
        };
        let out = &mut program.source;
        let mut line = first_line;
        for piece in pieces {
            match piece {
                TemplatePiece::Text(text) => {
                    S::text(out, program.texts.len());
                    program.texts.push((*text).to_owned());
                }
                TemplatePiece::File(reference) => {
                    S::file(out, program.references.len());
                    program.references.push(OwnedReference::new(reference));
                }
                TemplatePiece::Expression { code, line: at }
                | TemplatePiece::Code { code, line: at } => {
                    if *at > line {
                        S::pad(out, (*at - line) as usize);
                        line = *at;
                    }
                    if matches!(piece, TemplatePiece::Expression { .. }) {
                        S::expression(out, code);
                    } else {
                        S::code(out, code);
                    }
                    line += memchr::memchr_iter(b'\n', code.as_bytes()).count() as u32;
                }
            }
        }
        program
    }

    /// A line of the program as a line of the transcript.
    pub(crate) fn transcript_line(&self, line: u32) -> u32 {
        self.first_line + line.saturating_sub(1)
    }
}

/// A file reference the engines keep past the pieces' lifetime (their functions are
/// `'static`).
#[derive(Debug, Clone)]
pub(crate) struct OwnedReference {
    path: String,
    mime: Option<String>,
    written: String,
    line: u32,
}

impl OwnedReference {
    pub(crate) fn new(reference: &FileReference<'_>) -> Self {
        Self {
            path: reference.path.to_string(),
            mime: reference.mime.map(str::to_owned),
            written: reference.written.to_owned(),
            line: reference.line,
        }
    }

    pub(crate) fn borrow(&self) -> FileReference<'_> {
        FileReference {
            path: self.path.as_str().into(),
            mime: self.mime.as_deref(),
            written: &self.written,
            line: self.line,
        }
    }
}

/// The pieces of `segments`: trim dashes applied to the neighbouring text, file references
/// split out of text when `references` is set. Other segments are skipped.
pub(crate) fn pieces(segments: &[Segment], references: bool) -> Vec<TemplatePiece<'_>> {
    let trims = |segment: Option<&Segment>| match segment {
        Some(Segment::Expression(t) | Segment::Code(t)) => (t.trim_before, t.trim_after),
        _ => (false, false),
    };
    // Room for a reference and the text after it in each segment.
    let mut out = Vec::with_capacity(segments.len() * 2 + 1);
    for (i, segment) in segments.iter().enumerate() {
        match segment {
            Segment::Text(text) => {
                let mut value = text.value.as_str();
                if i > 0 && trims(segments.get(i - 1)).1 {
                    value = value.trim_start();
                }
                if trims(segments.get(i + 1)).0 {
                    value = value.trim_end();
                }
                if value.is_empty() {
                    continue;
                }
                if references {
                    // The line of the first byte kept, after trimming.
                    let start = text.span.map_or(1, |s| s.start_line);
                    let skipped = value.as_ptr() as usize - text.value.as_ptr() as usize;
                    let first_line = start
                        + memchr::memchr_iter(b'\n', &text.value.as_bytes()[..skipped]).count()
                            as u32;
                    fileref::split_into(value, first_line, |chunk| {
                        out.push(match chunk {
                            Chunk::Text(text) => TemplatePiece::Text(text),
                            Chunk::Ref(reference) => TemplatePiece::File(reference),
                        });
                    });
                } else {
                    out.push(TemplatePiece::Text(value));
                }
            }
            Segment::Expression(t) => out.push(TemplatePiece::Expression {
                code: &t.code,
                line: t.span.start_line,
            }),
            Segment::Code(t) => out.push(TemplatePiece::Code {
                code: &t.code,
                line: t.span.start_line,
            }),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trim_dashes_trim_the_neighbouring_text() {
        let doc = flemma_ast::parse_template("a  \n{{- x -}}\n  b {{ y }} c", 1);
        let got = pieces(&doc, false);
        assert_eq!(got[0], TemplatePiece::Text("a"));
        assert_eq!(got[2], TemplatePiece::Text("b "));
        assert_eq!(got[4], TemplatePiece::Text(" c"));
    }
}
