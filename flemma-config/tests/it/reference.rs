//! The options schema as `known_options` lists it, from which the book's configuration
//! reference is generated (the facade's `book` tests check the page).

use flemma_config::{FrontmatterRule, known_options};

/// Every option has a sentence, and the ones a frontmatter may only narrow say so.
#[test]
fn every_option_is_described() {
    let options: Vec<_> = known_options().collect();
    assert!(options.len() > 50);
    for option in &options {
        assert!(
            option.doc.ends_with('.'),
            "{}: {:?}",
            option.path,
            option.doc
        );
    }
    let narrow = |path: &str| {
        options
            .iter()
            .find(|o| o.path == path)
            .map(|o| o.frontmatter)
    };
    assert_eq!(narrow("tools.max_concurrent"), Some(FrontmatterRule::Any));
    assert_eq!(
        narrow("sandbox.backends.bwrap.path"),
        Some(FrontmatterRule::HostOnly)
    );
    assert!(matches!(
        narrow("sandbox.enabled"),
        Some(FrontmatterRule::Narrow(_))
    ));
    assert!(matches!(
        narrow("tools.env.inherit"),
        Some(FrontmatterRule::NarrowOrder(["none", "core", "all"]))
    ));
}
