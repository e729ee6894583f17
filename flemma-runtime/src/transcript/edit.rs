//! The one revision-checked edit loop, and the result writes built on it.

use flemma_ast::writer::{self, ResultBody, WriterOptions};
use flemma_ast::{AstError, Document, IncrementalParser, TextEdit, ToolIndex, ToolStatus};
use flemma_ids::ToolUseId;

use super::{EDIT_ATTEMPTS, Transcript, TranscriptError, refresh};
use crate::conversation::{ConversationError, Durability};
use flemma_core::Revision;

impl Transcript {
    /// Computes edits from the current document (and its text) and applies them as one
    /// change, computing them again (up to [`EDIT_ATTEMPTS`] times) when the conversation
    /// changed in between. Returns the revision written, or `None` when `f` had nothing to
    /// change. `f` runs under the transcript's lock, as [`read`](Self::read)'s does.
    ///
    /// # Errors
    ///
    /// `f`'s errors; [`TranscriptError::Busy`] when the text kept changing,
    /// [`TranscriptError::Edit`] when the edits do not fit, [`TranscriptError::Conversation`]
    /// when the conversation cannot be read or written (all through `E: From`).
    pub async fn edit<E: From<TranscriptError>>(
        &self,
        f: impl FnMut(&Document, &str) -> Result<Vec<TextEdit>, E>,
    ) -> Result<Option<Revision>, E> {
        self.edit_stored(Durability::Durable, f).await
    }

    /// [`edit`](Self::edit), the change stored as `durability` asks (see [`Durability`]:
    /// [`Durability::Buffered`] for text written again after a crash anyway, made durable by
    /// [`Conversation::sync`](crate::Conversation::sync)).
    ///
    /// # Errors
    ///
    /// As [`edit`](Self::edit).
    pub async fn edit_stored<E: From<TranscriptError>>(
        &self,
        durability: Durability,
        mut f: impl FnMut(&Document, &str) -> Result<Vec<TextEdit>, E>,
    ) -> Result<Option<Revision>, E> {
        self.edit_parsed(durability, |parser| f(parser.document(), parser.text()))
            .await
    }

    /// [`edit`](Self::edit) with the document's [`ToolIndex`] (built once per revision by the
    /// parser, shared by every reader and edit at that revision) instead of its text.
    ///
    /// # Errors
    ///
    /// As [`edit`](Self::edit).
    pub(crate) async fn edit_indexed<E: From<TranscriptError>>(
        &self,
        mut f: impl FnMut(&Document, &ToolIndex) -> Result<Vec<TextEdit>, E>,
    ) -> Result<Option<Revision>, E> {
        self.edit_parsed(Durability::Durable, |parser| {
            f(parser.document(), parser.tool_index())
        })
        .await
    }

    /// The loop of [`edit`](Self::edit), `f` handed the parser at the revision it edits.
    async fn edit_parsed<E: From<TranscriptError>>(
        &self,
        durability: Durability,
        mut f: impl FnMut(&IncrementalParser) -> Result<Vec<TextEdit>, E>,
    ) -> Result<Option<Revision>, E> {
        let _one_at_a_time = self.editing.lock().await;
        for _ in 0..EDIT_ATTEMPTS {
            let snapshot = self
                .conversation
                .snapshot()
                .await
                .map_err(TranscriptError::from)?;
            let edits = {
                let mut parsed = self.lock_parsed();
                f(&refresh(&mut parsed, &snapshot).parser)?
            };
            if edits.is_empty() {
                return Ok(None);
            }
            let revision = snapshot.revision;
            // Let go of the text, so a conversation holding the only other reference can edit
            // it in place.
            drop(snapshot);
            match self.conversation.apply(revision, &edits, durability).await {
                Ok(applied) => {
                    let mut parsed = self.lock_parsed();
                    if let Some(parsed) = parsed.as_mut().filter(|p| p.revision == revision) {
                        // Both apply the same edits as the same splices, so the texts agree;
                        // the length check catches a conversation that applied them otherwise.
                        if parsed.parser.apply_edits(&edits).is_err()
                            || parsed.parser.text().len() != applied.text.len()
                        {
                            parsed.parser.update(&applied.text);
                        }
                        parsed.revision = applied.revision;
                        parsed.shared = None;
                    }
                    return Ok(Some(applied.revision));
                }
                Err(ConversationError::Stale { .. }) => {}
                Err(ConversationError::Edit(error)) => {
                    return Err(TranscriptError::Edit(error).into());
                }
                Err(other) => return Err(TranscriptError::from(other).into()),
            }
        }
        Err(TranscriptError::Busy.into())
    }

    /// Writes final results in one edit; a result whose block went away (the user removed
    /// it) gets an `(approved)` placeholder first (the placeholders of all such results in
    /// one more edit), then its result. A result whose tool use is gone too is dropped:
    /// there is nowhere to write it.
    ///
    /// # Errors
    ///
    /// As [`edit`](Self::edit).
    pub async fn write_results(
        &self,
        results: &[(ToolUseId, ResultBody)],
        writer: WriterOptions,
    ) -> Result<(), TranscriptError> {
        let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
        self.edit_blocks(&ids, writer, |doc, index, at, edits| {
            let (id, body) = &results[at];
            edits.push(writer::write_result_in(
                doc,
                index,
                id.as_str(),
                body,
                writer,
            )?);
            Ok(())
        })
        .await
    }

    /// Edits the result blocks of `ids` in one edit: `f` pushes the edits of the block of
    /// `ids[at]` (an [`AstError::UnknownToolResult`]: the block went away). Blocks the user
    /// removed get an `(approved)` placeholder first (all of them in one more edit), then `f`
    /// again; a block whose tool use is gone too is left out: there is nowhere to put it.
    ///
    /// # Errors
    ///
    /// As [`edit`](Self::edit); `f`'s other errors as [`TranscriptError::Edit`].
    pub(crate) async fn edit_blocks(
        &self,
        ids: &[&str],
        writer: WriterOptions,
        mut f: impl FnMut(&Document, &ToolIndex, usize, &mut Vec<TextEdit>) -> Result<(), AstError>,
    ) -> Result<(), TranscriptError> {
        let mut pending: Vec<usize> = (0..ids.len()).collect();
        let mut placed_again = false;
        loop {
            let mut missing = Vec::new();
            self.edit_indexed(|doc, index| {
                missing.clear();
                let mut edits = Vec::with_capacity(pending.len());
                for &at in &pending {
                    let before = edits.len();
                    match f(doc, index, at, &mut edits) {
                        Ok(()) => {}
                        // Put back below (once); after that, nowhere to write.
                        Err(AstError::UnknownToolResult { .. }) => {
                            edits.truncate(before);
                            missing.push(at);
                        }
                        Err(error) => return Err(TranscriptError::Edit(error)),
                    }
                }
                Ok(edits)
            })
            .await?;
            if missing.is_empty() || placed_again {
                return Ok(());
            }
            placed_again = true;
            let batch: Vec<(&str, ToolStatus)> = missing
                .iter()
                .map(|&at| (ids[at], ToolStatus::Approved))
                .collect();
            self.place(&batch, writer).await?;
            pending = missing;
        }
    }

    /// Inserts the placeholders of `batch` in one edit, leaving out the tool uses that went
    /// away (the batch is computed against the document of the moment).
    ///
    /// # Errors
    ///
    /// As [`edit`](Self::edit).
    pub async fn place(
        &self,
        batch: &[(&str, ToolStatus)],
        writer: WriterOptions,
    ) -> Result<Option<Revision>, TranscriptError> {
        self.place_stored(batch, writer, Durability::Durable).await
    }

    /// [`place`](Self::place), the change stored as `durability` asks. The executor's Phase 1
    /// places [`Durability::Buffered`]: a placeholder is written again after a crash anyway
    /// (the next cycle places it again), and the cycle makes it durable before any call
    /// starts (the cleared `(approved)` suffix is a durable change) or when it ends.
    ///
    /// # Errors
    ///
    /// As [`edit`](Self::edit).
    pub async fn place_stored(
        &self,
        batch: &[(&str, ToolStatus)],
        writer: WriterOptions,
        durability: Durability,
    ) -> Result<Option<Revision>, TranscriptError> {
        self.edit_stored(durability, |doc, _| placeholders(doc, batch, writer))
            .await
    }
}

/// The placeholder edits of `batch`, without the tool uses that are not in `doc`.
pub(crate) fn placeholders(
    doc: &Document,
    batch: &[(&str, ToolStatus)],
    writer: WriterOptions,
) -> Result<Vec<TextEdit>, TranscriptError> {
    match writer::insert_placeholders(doc, batch, writer) {
        Err(AstError::UnknownToolUse { .. }) => {
            let present: Vec<(&str, ToolStatus)> = batch
                .iter()
                .copied()
                .filter(|(id, _)| flemma_ast::find_tool_use_by_id(doc, id).is_some())
                .collect();
            writer::insert_placeholders(doc, &present, writer).map_err(TranscriptError::Edit)
        }
        other => other.map_err(TranscriptError::Edit),
    }
}
