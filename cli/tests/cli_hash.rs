//! `simstore hash`: files, directories, standard input, JSONL and HTML,
//! and per-document warnings for bad inputs.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::process::Output;

fn hash(args: &[&str], stdin: &str) -> Output {
    let args: Vec<&str> = std::iter::once("hash")
        .chain(args.iter().copied())
        .collect();
    common::run_bin(env!("CARGO_BIN_EXE_simstore"), &args, stdin)
}

#[test]
fn files_directories_and_stdin() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::create_dir(d.join("sub")).unwrap();
    std::fs::write(
        d.join("b.txt"),
        "The quick brown fox jumps over the lazy dog.",
    )
    .unwrap();
    std::fs::write(
        d.join("sub/a.txt"),
        "The quick brown fox jumps over the lazy dog!",
    )
    .unwrap();
    std::fs::write(
        d.join("a.html"),
        "<p>The quick <i>brown</i> fox jumps over the lazy dog.</p><script>var x;</script>",
    )
    .unwrap();
    let out = hash(&[d.to_str().unwrap()], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let names: Vec<&str> = text
        .lines()
        .map(|l| l.split('\t').nth(1).unwrap())
        .collect();
    let base = d.to_str().unwrap();
    assert_eq!(
        names,
        [
            format!("{base}/a.html"),
            format!("{base}/b.txt"),
            format!("{base}/sub/a.txt")
        ]
    );
    assert!(
        text.lines()
            .skip(1)
            .all(|l| l.starts_with("d078e8403aa2aa98\t")),
        "{text}"
    );
    // HTML mode sees only the visible text.
    let out = hash(&["--html", d.join("a.html").to_str().unwrap()], "");
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .starts_with("d078e8403aa2aa98\t"));
    // Standard input is one document named "-".
    let out = hash(&[], "the quick brown fox jumps over the lazy dog");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "d078e8403aa2aa98\t-\n"
    );
}

/// The names (second fields) of `hash`'s output lines.
fn names(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .map(|l| l.split('\t').nth(1).unwrap())
        .collect()
}

/// A number id is named by its digits, whatever its size: two ids past 64
/// bits are two names, not one rounded value.
#[test]
fn jsonl_number_ids_keep_their_digits() {
    let input = "{\"id\":99999999999999999999,\"text\":\"one two three\"}\n\
                 {\"id\":100000000000000000000,\"text\":\"four five six\"}\n\
                 {\"id\":123456789012345678901234567890,\"text\":\"seven\"}\n\
                 {\"id\":-5,\"text\":\"eight\"}\n";
    let out = hash(&["--jsonl"], input);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let ids = names(&stdout);
    assert_eq!(
        ids,
        [
            "99999999999999999999",
            "100000000000000000000",
            "123456789012345678901234567890",
            "-5"
        ]
    );
}

#[test]
fn jsonl_records_and_bad_inputs() {
    let input = "{\"doc\":\"a1\",\"body\":\"The quick brown fox jumps over the lazy dog.\"}\n\
                 {\"doc\":7,\"body\":\"hello world\"}\n\
                 {\"doc\":\"a3\"}\n\
                 not json\n\
                 \n\
                 {\"doc\":\"a5\",\"body\":\"...\"}\n";
    let out = hash(
        &["--jsonl", "--text-field", "body", "--id-field", "doc"],
        input,
    );
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let ids = names(&stdout);
    assert_eq!(ids, ["a1", "7"]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("line 3: no string field \"body\""),
        "{stderr}"
    );
    assert!(stderr.contains("line 4: malformed JSON"), "{stderr}");
    assert!(stderr.contains("a5: empty document"), "{stderr}");

    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin.dat");
    std::fs::write(&bin, [0xff, 0xfe, 0x00, 0x80]).unwrap();
    let good = tmp.path().join("good.txt");
    std::fs::write(&good, "some words here").unwrap();
    let out = hash(
        &[
            bin.to_str().unwrap(),
            "/nonexistent/file",
            good.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("not valid UTF-8") && stderr.contains("cannot read"),
        "{stderr}"
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().lines().count(),
        1,
        "the good file is still hashed"
    );
}

/// `hash`'s lines fed to `query` as they are: every answer is the one its
/// fingerprint alone gets, with the document's name echoed, in every
/// query mode (`hash --weights`'s lines with `--probabilistic`).
#[test]
fn hash_lines_query_with_their_names() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    let mut rng = common::Rng(7);
    let words: Vec<String> = (0..400).map(|i| format!("w{i}")).collect();
    let text = |rng: &mut common::Rng| -> String {
        (0..60)
            .map(|_| words[rng.below(words.len() as u64) as usize].as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    for i in 0..40 {
        let body = text(&mut rng);
        // Names with a space, a quote and a backslash, and near-copies.
        std::fs::write(docs.join(format!("doc {i} \"q\"\\.txt")), &body).unwrap();
        if i % 4 == 0 {
            std::fs::write(docs.join(format!("copy {i}.txt")), body + " extra").unwrap();
        }
    }
    let d = docs.to_str().unwrap();
    let store = tmp.path().join("s");
    let s = store.to_str().unwrap();
    let bin = env!("CARGO_BIN_EXE_simstore");
    common::ok_bin(
        bin,
        &["create", s, "--tables", "1", "--max-distance", "6"],
        "",
    );
    let hashed = common::ok_bin(bin, &["hash", d], "");
    let weighed = common::ok_bin(bin, &["hash", "--weights", d], "");
    let stored: String = hashed
        .lines()
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(i, l)| format!("{} {i}\n", &l[..16]))
        .collect();
    common::ok_bin(bin, &["add", s], &stored);
    let json_name = |name: &str| name.replace('\\', "\\\\").replace('"', "\\\"");
    for (lines, modes) in [
        (
            &hashed,
            &[&["--max-distance", "6"][..], &["--batch"], &["--first"]][..],
        ),
        (
            &weighed,
            &[
                &["--probabilistic", "--max-distance", "6"][..],
                &["--first"],
            ][..],
        ),
    ] {
        let names: Vec<&str> = lines
            .lines()
            .map(|l| l.rsplit('\t').next().unwrap())
            .collect();
        for mode in modes {
            // Without the name; exact queries take the fingerprint alone.
            let probabilistic = mode.contains(&"--probabilistic");
            let bare: String = lines
                .lines()
                .map(|l| match probabilistic {
                    true => l.rsplit_once('\t').unwrap().0.to_string() + "\n",
                    false => l[..16].to_string() + "\n",
                })
                .collect();
            let args: Vec<&str> = ["query", s].iter().chain(mode.iter()).copied().collect();
            let named = common::ok_bin(bin, &args, lines);
            let plain = common::ok_bin(bin, &args, &bare);
            assert_eq!(named.lines().count(), names.len());
            let mut matched = 0;
            for ((got, want), name) in named.lines().zip(plain.lines()).zip(&names) {
                let with_name = want.replacen(
                    "\",\"matches\"",
                    &format!("\",\"name\":\"{}\",\"matches\"", json_name(name)),
                    1,
                );
                assert_eq!(got, with_name, "{mode:?}");
                matched += usize::from(!got.ends_with("\"matches\":[]}"));
            }
            assert!(matched >= names.len() / 2, "{mode:?}: {matched}");
        }
    }
    // A name with no fingerprint before it is refused with its line.
    let out = common::run_bin(bin, &["query", s], "\tname\n");
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 1: no fingerprint before the name"));
}

/// A directory walk follows symbolic links, but not back into a directory
/// it is inside: each file once, each loop a warning (exit 3), and two
/// loops still end. A link to a directory elsewhere is walked.
#[test]
fn symbolic_link_loops_are_walked_once() {
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path().join("top");
    let other = tmp.path().join("other");
    std::fs::create_dir_all(top.join("sub")).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(top.join("a.txt"), "hello world of plain text here").unwrap();
    std::fs::write(other.join("b.txt"), "another text somewhere else entirely").unwrap();
    std::os::unix::fs::symlink("..", top.join("sub/up")).unwrap();
    std::os::unix::fs::symlink(".", top.join("sub/up2")).unwrap();
    std::os::unix::fs::symlink(&other, top.join("sub/elsewhere")).unwrap();
    let out = hash(&[top.to_str().unwrap()], "");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let names: Vec<&str> = stdout
        .lines()
        .map(|l| l.split('\t').nth(1).unwrap())
        .collect();
    let a = top.join("a.txt");
    let b = top.join("sub/elsewhere/b.txt");
    assert_eq!(names, [a.to_str().unwrap(), b.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("a link back to").count(), 2, "{stderr}");
    assert_eq!(out.status.code(), Some(3));
}

/// A shingle width of 0 is a bad command line (exit 2), not a width of 1.
#[test]
fn shingle_widths_of_zero_are_refused() {
    for flag in ["--shingle", "--char-shingle"] {
        let out = hash(&[flag, "0"], "some text to fingerprint here");
        assert_eq!(out.status.code(), Some(2), "{flag} 0");
        assert!(out.stdout.is_empty());
        let out = hash(&[flag, "1"], "some text to fingerprint here");
        assert!(out.status.success(), "{flag} 1");
    }
}

/// A name with a line break cannot be printed on one line: that document
/// is skipped with a warning (exit 3), the others printed.
#[test]
fn names_with_line_breaks_are_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let jsonl = tmp.path().join("j.jsonl");
    std::fs::write(
        &jsonl,
        "{\"id\":\"a\\nb\",\"text\":\"hello there world of words\"}\n\
         {\"id\":\"c\\rd\",\"text\":\"more words for a second one\"}\n\
         {\"id\":\"e\",\"text\":\"and a third text that is fine\"}\n",
    )
    .unwrap();
    let out = hash(&["--jsonl", jsonl.to_str().unwrap()], "");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.ends_with("\te\n"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("line break").count(), 2, "{stderr}");
    assert_eq!(out.status.code(), Some(3));
}
