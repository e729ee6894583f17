//! An open `.chat` document: its text in the incremental parser, its line index, and the
//! protocol's changes applied to both.

use flemma_ast::IncrementalParser;
use lsp_types::{Range, TextDocumentContentChangeEvent};

use crate::LspError;
use crate::position::LineIndex;

/// An open document: the parser (which owns the text), the protocol's line index over it and
/// the client's version.
#[derive(Debug)]
pub struct OpenDocument {
    parser: IncrementalParser,
    lines: LineIndex,
    version: i32,
}

impl OpenDocument {
    /// A document opened with `text` at `version`.
    pub fn new(text: String, version: i32) -> Self {
        let lines = LineIndex::new(&text);
        Self {
            parser: IncrementalParser::new(text),
            lines,
            version,
        }
    }

    /// The text.
    pub fn text(&self) -> &str {
        self.parser.text()
    }

    /// The parsed document (always a full parse of [`text`](Self::text)).
    pub fn document(&self) -> &flemma_ast::Document {
        self.parser.document()
    }

    /// The parser.
    pub fn parser(&self) -> &IncrementalParser {
        &self.parser
    }

    /// The protocol's lines.
    pub fn lines(&self) -> &LineIndex {
        &self.lines
    }

    /// The client's version of the text.
    pub fn version(&self) -> i32 {
        self.version
    }

    /// The bytes a protocol range covers.
    ///
    /// # Errors
    ///
    /// [`LspError::Range`] when a position lies past the last line, or the end before the
    /// start.
    pub fn byte_range(&self, range: Range) -> Result<std::ops::Range<usize>, LspError> {
        let text = self.parser.text();
        let out_of_text = || LspError::Range {
            range,
            lines: self.lines.line_count(),
        };
        let start = self
            .lines
            .offset(text, range.start)
            .ok_or_else(out_of_text)?;
        let end = self.lines.offset(text, range.end).ok_or_else(out_of_text)?;
        if end < start {
            return Err(out_of_text());
        }
        Ok(start..end)
    }

    /// Applies the changes of one `textDocument/didChange`, in order (each against the text
    /// the previous one left), then takes `version`. A change without a range replaces the
    /// whole text.
    ///
    /// # Errors
    ///
    /// [`LspError::Range`] for a change whose range does not fit the text: the changes before
    /// it stay applied, the version is not taken (the client should send the whole text
    /// again).
    pub fn apply(
        &mut self,
        changes: Vec<TextDocumentContentChangeEvent>,
        version: i32,
    ) -> Result<(), LspError> {
        for change in changes {
            match change.range {
                None => {
                    self.lines = LineIndex::new(&change.text);
                    self.parser.reset(change.text);
                }
                Some(range) => {
                    let bytes = self.byte_range(range)?;
                    self.splice(bytes, &change.text)?;
                }
            }
        }
        self.version = version;
        Ok(())
    }

    /// Replaces `bytes` with `with`, in the parser's text and the line index.
    fn splice(&mut self, bytes: std::ops::Range<usize>, with: &str) -> Result<(), LspError> {
        self.parser
            .replace_range(bytes.clone(), with)
            .map_err(LspError::Edit)?;
        self.lines.splice(
            self.parser.text().as_bytes(),
            bytes.start,
            bytes.end,
            with.len(),
        );
        Ok(())
    }
}
