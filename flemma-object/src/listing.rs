//! Listing a prefix page by page, past the keys `object_store` cannot take as paths.
//!
//! `object_store` parses every key of a `LIST` page as a [`Path`](ObjectPath); one key with a
//! `.`, `..` or empty segment, or a control character, fails the whole page, and with it any
//! listing that uses [`ObjectStore::list`](object_store::ObjectStore::list). Keys are chosen by
//! whoever can write to the bucket, so one such key would hide every conversation after it.
//!
//! A store that offers the paginated listing ([`PaginatedListStore`], S3's `ListObjectsV2`) is
//! listed here page by page: pages follow one another by their continuation tokens; a page that
//! fails on a key (the error names the raw key) is asked for again from the same place, half
//! as long, until it comes back, so that the keys before the bad one are kept; once the bad key
//! alone fails, the listing starts again after it (`start-after`, the raw key) and goes on.
//! That costs about twenty `LIST`s for each such key; a host that lists again passes the
//! [`Hints`] of the last listing (how many keys come before each skipped one), and a key met
//! where it was costs two more `LIST`s. [`Pager`] is that policy; [`list`] sends the
//! requests.

use std::collections::HashMap;

use object_store::ObjectMeta;
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::Error as PathError;

/// The longest page S3 sends (`max-keys`' default and most).
const PAGE: usize = 1000;

/// A key the listing skipped, as the server sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Skipped {
    /// The raw key (any bytes a writer chose: escape it before showing it).
    pub(crate) key: String,
    /// Why `object_store` cannot address it.
    pub(crate) why: &'static str,
    /// How many keys were listed before it since the start or the key skipped before it.
    pub(crate) before: usize,
}

/// What a listing learnt for the next one: for each key skipped, how many keys came before it
/// since the start or the key skipped before it.
pub(crate) type Hints = HashMap<String, usize>;

impl Listed {
    /// The hints for the next listing of the same prefix.
    pub(crate) fn hints(&self) -> Hints {
        self.skipped
            .iter()
            .map(|s| (s.key.clone(), s.before))
            .collect()
    }
}

/// What a listing found.
#[derive(Debug, Default)]
pub(crate) struct Listed {
    /// The objects, in the server's order.
    pub(crate) objects: Vec<ObjectMeta>,
    /// The keys skipped.
    pub(crate) skipped: Vec<Skipped>,
}

/// Where the next page starts and how long it is.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pager {
    /// The continuation token of the last page that came back.
    token: Option<String>,
    /// The raw key to start after (a skipped key), when there is no token.
    offset: Option<String>,
    /// The page's length: [`PAGE`], or less while a bad key is near.
    max_keys: usize,
    /// The keys listed since the start or the last key skipped.
    listed: usize,
    /// The known bad key the page was shortened to reach, by a hint.
    near: Option<String>,
}

/// What the listing does after a page failed on a bad key.
#[derive(Debug, PartialEq, Eq)]
enum Then {
    /// Ask again from the same place for a shorter page.
    Shorter,
    /// The key alone failed: skip it (the keys listed before it since the start or the last
    /// skip), go on after it.
    Skip(usize),
    /// The key was skipped already and came back: the server does not honour `start-after`.
    Stuck,
}

impl Pager {
    fn new() -> Self {
        Self {
            token: None,
            offset: None,
            max_keys: PAGE,
            listed: 0,
            near: None,
        }
    }

    fn options(&self) -> PaginatedListOptions {
        PaginatedListOptions {
            offset: self.offset.clone(),
            page_token: self.token.clone(),
            max_keys: Some(self.max_keys),
            ..PaginatedListOptions::default()
        }
    }

    /// A page of `count` keys came back with the continuation token `next`: whether there
    /// are more pages. A page halved is kept as short: the bad key that failed the longer one
    /// is within the next one. A page shortened by a hint is followed by the key alone.
    fn on_page(&mut self, count: usize, next: Option<String>, hints: &Hints) -> bool {
        self.listed += count;
        if let Some(near) = self.near.take() {
            // Where the hint put it: the key alone. Not there: keys were added before it;
            // full pages again (and halving when it fails one).
            if hints.get(&near) == Some(&self.listed) {
                self.max_keys = 1;
                self.near = Some(near);
            } else {
                self.max_keys = PAGE;
            }
        }
        match next {
            Some(token) => {
                self.token = Some(token);
                self.offset = None;
                true
            }
            None => false,
        }
    }

    /// A page failed on the raw `key` (`skipped`: the keys skipped so far in this listing;
    /// `hints`: the last listing's).
    fn on_bad_key(&mut self, key: &str, skipped: &[Skipped], hints: &Hints) -> Then {
        if self.max_keys > 1 {
            // The keys before it as many as last time: a page of those, then the key alone.
            let remaining = hints
                .get(key)
                .and_then(|before| before.checked_sub(self.listed))
                .filter(|remaining| *remaining < self.max_keys);
            self.max_keys = match remaining {
                Some(remaining) => remaining.max(1),
                None => self.max_keys / 2,
            };
            self.near = remaining.map(|_| key.to_owned());
            return Then::Shorter;
        }
        if skipped.iter().any(|s| s.key == key) {
            return Then::Stuck;
        }
        let before = self.listed;
        *self = Self {
            offset: Some(key.to_owned()),
            ..Self::new()
        };
        Then::Skip(before)
    }
}

/// The raw key a page failed on, and why, when `error` is `object_store`'s refusal of a key.
fn bad_key(error: &object_store::Error) -> Option<(&str, &'static str)> {
    match error {
        object_store::Error::InvalidPath {
            source: PathError::EmptySegment { path },
        } => Some((path, "an empty segment")),
        object_store::Error::InvalidPath {
            source: PathError::BadSegment { path, .. },
        } => Some((path, "a `.` or `..` segment or a control character")),
        _ => None,
    }
}

/// Every object under the raw `prefix` (`None`: the whole bucket), skipping the keys
/// `object_store` cannot take as paths, with the `hints` of the last listing of the prefix
/// (or none). `on_request` is called before each request.
///
/// # Errors
///
/// A request that fails for another reason than a key, or a server that lists a skipped key
/// again after it (it ignores `start-after`): the page's error.
pub(crate) async fn list(
    store: &dyn PaginatedListStore,
    prefix: Option<&str>,
    hints: &Hints,
    on_request: impl Fn(),
) -> Result<Listed, object_store::Error> {
    let mut listed = Listed::default();
    let mut pager = Pager::new();
    loop {
        on_request();
        match store.list_paginated(prefix, pager.options()).await {
            Ok(page) => {
                let count = page.result.objects.len();
                listed.objects.extend(page.result.objects);
                if !pager.on_page(count, page.page_token, hints) {
                    return Ok(listed);
                }
            }
            Err(error) => {
                let Some((key, why)) = bad_key(&error) else {
                    return Err(error);
                };
                match pager.on_bad_key(key, &listed.skipped, hints) {
                    Then::Shorter => {}
                    Then::Skip(before) => listed.skipped.push(Skipped {
                        key: key.to_owned(),
                        why,
                        before,
                    }),
                    Then::Stuck => return Err(error),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skipped(key: &str) -> Skipped {
        Skipped {
            key: key.to_owned(),
            why: "",
            before: 0,
        }
    }

    fn at(token: Option<&str>, offset: Option<&str>, max_keys: usize, listed: usize) -> Pager {
        Pager {
            token: token.map(str::to_owned),
            offset: offset.map(str::to_owned),
            max_keys,
            listed,
            near: None,
        }
    }

    #[test]
    fn pages_follow_their_continuation_tokens() {
        let none = Hints::new();
        let mut pager = Pager::new();
        assert!(pager.on_page(1000, Some("t1".into()), &none));
        assert_eq!(pager, at(Some("t1"), None, PAGE, 1000));
        assert!(!pager.on_page(3, None, &none), "the last page");
    }

    #[test]
    fn a_page_that_fails_on_a_key_is_asked_for_again_half_as_long_from_the_same_place() {
        let none = Hints::new();
        let mut pager = Pager::new();
        assert!(pager.on_page(1000, Some("t1".into()), &none));
        assert_eq!(pager.on_bad_key("p/../x", &[], &none), Then::Shorter);
        assert_eq!(
            pager,
            at(Some("t1"), None, PAGE / 2, 1000),
            "the same place"
        );
        // The shorter page came back: the bad key is in the next one, as short.
        assert!(pager.on_page(500, Some("t2".into()), &none));
        assert_eq!(pager, at(Some("t2"), None, PAGE / 2, 1500));
        for _ in 0..8 {
            assert_eq!(pager.on_bad_key("p/../x", &[], &none), Then::Shorter);
        }
        assert_eq!(pager.max_keys, 1);
    }

    #[test]
    fn a_key_that_fails_alone_is_skipped_and_the_listing_goes_on_after_it() {
        let mut pager = at(Some("t"), None, 1, 7);
        assert_eq!(
            pager.on_bad_key("p/../x", &[], &Hints::new()),
            Then::Skip(7)
        );
        assert_eq!(
            pager,
            at(None, Some("p/../x"), PAGE, 0),
            "after the raw key, full pages again"
        );
    }

    #[test]
    fn a_skipped_key_listed_again_stops_the_listing() {
        let mut pager = at(None, Some("p/../x"), 1, 0);
        assert_eq!(
            pager.on_bad_key("p/../x", &[skipped("p/../x")], &Hints::new()),
            Then::Stuck
        );
    }

    #[test]
    fn a_key_skipped_last_time_is_reached_in_two_pages_where_it_was() {
        let hints = Hints::from([("p/../x".to_owned(), 1200)]);
        let mut pager = Pager::new();
        assert!(pager.on_page(1000, Some("t1".into()), &hints));
        assert_eq!(pager.on_bad_key("p/../x", &[], &hints), Then::Shorter);
        assert_eq!(pager.max_keys, 200, "the keys before it");
        assert!(pager.on_page(200, Some("t2".into()), &hints));
        assert_eq!(pager.max_keys, 1, "then the key alone");
        assert_eq!(pager.on_bad_key("p/../x", &[], &hints), Then::Skip(1200));
    }

    #[test]
    fn a_key_first_in_its_page_as_last_time_is_asked_for_alone() {
        let hints = Hints::from([("p/../x".to_owned(), 0)]);
        let mut pager = Pager::new();
        assert_eq!(pager.on_bad_key("p/../x", &[], &hints), Then::Shorter);
        assert_eq!(pager.max_keys, 1);
        assert_eq!(pager.on_bad_key("p/../x", &[], &hints), Then::Skip(0));
    }

    #[test]
    fn a_hint_out_of_date_falls_back_to_halving() {
        // Keys were removed before it: the short page fails on it too.
        let hints = Hints::from([("p/../x".to_owned(), 300)]);
        let mut pager = Pager::new();
        assert_eq!(pager.on_bad_key("p/../x", &[], &hints), Then::Shorter);
        assert_eq!(pager.max_keys, 300);
        assert_eq!(pager.on_bad_key("p/../x", &[], &hints), Then::Shorter);
        assert_eq!(pager.max_keys, 150);
        // Keys were added before it: the page of as many comes back short of it.
        let mut pager = Pager::new();
        assert_eq!(pager.on_bad_key("p/../x", &[], &hints), Then::Shorter);
        assert!(pager.on_page(300, Some("t".into()), &hints));
        assert_eq!(pager.max_keys, 1);
        assert!(pager.on_page(1, Some("t2".into()), &hints), "a new key");
        assert_eq!(pager.max_keys, PAGE, "not where it was: full pages");
        assert_eq!(pager.on_bad_key("p/../x", &[], &hints), Then::Shorter);
        assert_eq!(pager.max_keys, PAGE / 2, "halving, past the hint");
    }

    #[test]
    fn only_object_stores_refusal_of_a_key_names_one() {
        let parse = |key: &str| {
            object_store::path::Path::parse(key)
                .map(|_| ())
                .map_err(object_store::Error::from)
        };
        for key in [
            "p/../x.chat",
            "p/./x.chat",
            "p//x.chat",
            "p/a\u{1b}[2K.chat",
        ] {
            let Err(error) = parse(key) else {
                panic!("{key:?} parses");
            };
            assert_eq!(bad_key(&error).map(|(k, _)| k), Some(key));
        }
        let other = object_store::Error::NotImplemented {
            operation: "list".into(),
            implementer: "test".into(),
        };
        assert_eq!(bad_key(&other), None);
    }
}
