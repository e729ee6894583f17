//! Joining text pieces without copying a lone one.

use std::borrow::Cow;

/// Text pieces joined; borrowed while there is at most one.
#[derive(Debug, Default)]
pub(crate) struct Joined<'a> {
    text: Option<Cow<'a, str>>,
}

impl<'a> Joined<'a> {
    pub(crate) fn push(&mut self, piece: impl Into<Cow<'a, str>>) {
        let piece = piece.into();
        match &mut self.text {
            None => self.text = Some(piece),
            Some(text) => text.to_mut().push_str(&piece),
        }
    }

    /// The text as joined, empty when nothing was pushed. Empties the run.
    pub(crate) fn take(&mut self) -> Cow<'a, str> {
        self.text.take().unwrap_or_default()
    }

    /// The text unless it is blank (kept as it is). Empties the run.
    pub(crate) fn take_unless_blank(&mut self) -> Option<Cow<'a, str>> {
        self.text.take().filter(|t| !t.trim().is_empty())
    }

    /// The text trimmed; `None` when blank. Empties the run.
    pub(crate) fn take_trimmed(&mut self) -> Option<Cow<'a, str>> {
        match self.text.take()? {
            Cow::Borrowed(t) => Some(Cow::Borrowed(t.trim())).filter(|t| !t.is_empty()),
            Cow::Owned(t) => {
                let trimmed = t.trim();
                (!trimmed.is_empty()).then(|| Cow::Owned(trimmed.to_owned()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_piece_stays_borrowed() {
        let source = String::from("  one  ");
        let mut joined = Joined::default();
        joined.push(source.as_str());
        assert!(matches!(joined.take_trimmed(), Some(Cow::Borrowed("one"))));
        joined.push("a ");
        joined.push(String::from("b"));
        assert_eq!(joined.take(), "a b");
        joined.push(" \n");
        assert_eq!(joined.take_unless_blank(), None);
        assert_eq!(joined.take(), "");
    }
}
