//! The code against storage-format.md: the example block there is what the
//! encoder produces, byte for byte.

use simstore::codec::{encode_blocks, BlockView, Code, SYMBOLS};

fn golden_block() -> Vec<u8> {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/storage-format.md")).unwrap();
    let at = doc
        .find("<!-- golden-block -->")
        .expect("golden block marker");
    let rest = &doc[at..];
    let start = rest.find("```\n").unwrap() + 4;
    let end = start + rest[start..].find("```").unwrap();
    let hex: String = rest[start..end]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&hex[i..i + 2], 16)
                .unwrap_or_else(|_| panic!("bad hex in document: {hex}"))
        })
        .collect()
}

#[test]
fn example_block_matches_the_document() {
    let code = Code::from_counts(&[0; SYMBOLS]);
    assert!(code.lengths().iter().all(|&l| l == 6));
    let fps = [
        0x0123_4567_89ab_cdef,
        0x0123_4567_89ab_cdf0,
        0x0123_4567_89ac_0000,
        1 << 63,
        u64::MAX,
    ];
    let blocks = encode_blocks(&fps, &code, 0, 1024).unwrap();
    assert_eq!(blocks.len(), 1);
    let hex: String = blocks[0].iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(blocks[0], golden_block(), "encoder output: {hex}");
    let mut out = Vec::new();
    BlockView::parse(&blocks[0])
        .unwrap()
        .decode_into(&code, &mut out)
        .unwrap();
    assert_eq!(out, fps);
}
