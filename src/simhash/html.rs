//! Visible text of an HTML document: scripts, styles and tags dropped.

use scraper::{Html, Node};

/// Elements whose contents are never visible text.
const HIDDEN: &[&str] = &["script", "style", "noscript", "template", "head", "title"];

/// The visible text of an HTML document, text nodes separated by spaces.
pub fn visible_text(html: &str) -> String {
    let doc = Html::parse_document(html);
    let mut out = String::new();
    for node in doc.tree.root().descendants() {
        if let Node::Text(text) = node.value() {
            let hidden = node.ancestors().any(|a| {
                a.value()
                    .as_element()
                    .is_some_and(|e| HIDDEN.contains(&e.name()))
            });
            if !hidden {
                out.push_str(text);
                out.push(' ');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn drops_scripts_styles_and_tags() {
        let html = "<html><head><title>T</title><style>p{}</style></head><body><p>Hello <b>world</b></p>\
                    <script>var x = 1;</script><!-- note --><div>again&amp;more</div></body></html>";
        let text = super::visible_text(html);
        let words: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(words, ["Hello", "world", "again&more"]);
    }
}
