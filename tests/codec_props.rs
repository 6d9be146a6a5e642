//! Property tests of the pure layers: the table-driven decoder against the
//! bit-at-a-time reference, round trips of arbitrary sorted runs, hostile
//! bytes, and the block index against a linear search.

use proptest::prelude::*;
use simstore::codec::{encode_blocks, BlockView, Code, MIN_BLOCK_LEN, SYMBOLS};

fn code_strategy() -> impl Strategy<Value = Code> {
    prop::collection::vec(0u64..1_000_000, SYMBOLS).prop_map(|v| {
        let counts: [u64; SYMBOLS] = v.try_into().unwrap();
        Code::from_counts(&counts)
    })
}

fn sorted_run() -> impl Strategy<Value = Vec<u64>> {
    prop_oneof![
        prop::collection::btree_set(any::<u64>(), 1..400),
        // Clustered: a base plus small offsets, including dense runs.
        (
            any::<u64>(),
            prop::collection::btree_set(0u64..5000, 1..400)
        )
            .prop_map(|(base, offs)| offs.into_iter().map(|o| base.wrapping_add(o)).collect()),
        prop::collection::btree_set(
            prop_oneof![Just(0u64), Just(u64::MAX), Just(1u64 << 63), any::<u64>()],
            1..8
        ),
    ]
    .prop_map(|s| s.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn encode_decode_round_trip(fps in sorted_run(), code in code_strategy(), size in MIN_BLOCK_LEN..1100usize) {
        let blocks = encode_blocks(&fps, &code, 3, size).unwrap();
        let mut all = Vec::new();
        let mut out = Vec::new();
        for b in &blocks {
            prop_assert!(b.len() <= size);
            let view = BlockView::parse(b).unwrap();
            view.decode_into(&code, &mut out).unwrap();
            prop_assert_eq!(&view.decode_slow(&code).unwrap(), &out);
            all.extend_from_slice(&out);
        }
        prop_assert_eq!(all, fps);
    }

    #[test]
    fn fast_and_reference_decoders_agree_on_hostile_bytes(
        mut bytes in prop::collection::vec(any::<u8>(), 0..300),
        code in code_strategy(),
        count in 1u16..2000,
    ) {
        // Give the bytes a valid header so decoding proper is exercised.
        if bytes.len() >= MIN_BLOCK_LEN {
            bytes[0] = 1;
            bytes[1..3].copy_from_slice(&count.to_be_bytes());
            bytes[3..7].copy_from_slice(&0u32.to_be_bytes());
            let mut h = crc32fast::Hasher::new();
            h.update(&bytes[..7]);
            h.update(&bytes[11..]);
            let crc = h.finalize();
            bytes[7..11].copy_from_slice(&crc.to_be_bytes());
        }
        match BlockView::parse(&bytes) {
            Err(_) => prop_assert!(bytes.len() < MIN_BLOCK_LEN),
            Ok(view) => {
                let mut fast = Vec::new();
                let fast = view.decode_into(&code, &mut fast).map(|()| fast);
                let slow = view.decode_slow(&code);
                prop_assert_eq!(fast, slow);
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..1200)) {
        let code = Code::from_counts(&[1; SYMBOLS]);
        if let Ok(view) = BlockView::parse(&bytes) {
            let _ = view.decode_into(&code, &mut Vec::new());
        }
        let _ = simstore::format::manifest::Manifest::decode(&bytes);
        let _ = simstore::format::records::decode_code(&bytes);
    }

    #[test]
    fn index_locate_matches_linear_search(mut keys in prop::collection::vec(any::<u64>(), 0..300), probes in prop::collection::vec(any::<u64>(), 1..50)) {
        keys.sort_unstable();
        keys.dedup();
        for p in probes.into_iter().chain(keys.iter().copied()) {
            let expect = keys.iter().rposition(|&k| k <= p);
            prop_assert_eq!(simstore::index::locate(&keys, p), expect);
        }
    }
}
