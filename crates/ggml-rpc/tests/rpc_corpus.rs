//! Replays the `rpc_decode` fuzz corpus (and any fixed crash input under
//! `tests/fixtures/crashes/`) through a server session: none may panic, and the seeds, which
//! are well-formed sessions, must be served to the end.

#[path = "support/fuzz_one.rs"]
mod fuzz_one;

use std::path::Path;

fn files(dir: &str) -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut v: Vec<_> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    v.sort();
    v
}

#[test]
fn the_corpus_replays_without_a_panic() {
    let corpus = files("tests/fixtures/corpus");
    assert!(corpus.len() >= 5, "{} corpus files", corpus.len());
    let mut served = 0;
    for f in corpus.iter().chain(files("tests/fixtures/crashes").iter()) {
        let data = std::fs::read(f).unwrap();
        let (ok, _) = fuzz_one::run(&data);
        served += usize::from(ok);
    }
    assert!(served > 0, "no corpus input was served to its end");
}

#[test]
fn the_seeds_are_served_with_the_right_answers() {
    let dir = "tests/fixtures/corpus";
    let read = |n: &str| std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join(dir).join(n));
    // add_graph: two uploads, ADD, a read (16 bytes), GRAPH_RECOMPUTE, a read.
    let (ok, out) = fuzz_one::run(&read("seed_add_graph").unwrap());
    assert!(ok);
    // The preamble answers HELLO (8 + 28) and ALLOC_BUFFER (8 + 16); then two reads.
    assert_eq!(out, 8 + 28 + 8 + 16 + 2 * (8 + 16));
    let (ok, _) = fuzz_one::run(&read("seed_queries").unwrap());
    assert!(ok);
}
