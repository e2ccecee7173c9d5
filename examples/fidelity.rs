//! Prints the mapping fidelity of the `auto` profile on the corpus in `tests/fidelity/`: per
//! layout, fields right / fields expected, values outside the spec's lists, required rejections.
//!
//! `cargo run --example fidelity` (add `-- --misses` to list every wrong or missing field, and
//! `-- --dir PATH` to score another corpus laid out the same way)

#[path = "../tests/fidelity/score.rs"]
mod score;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args
        .iter()
        .position(|a| a == "--dir")
        .and_then(|i| args.get(i + 1))
        .map(std::path::PathBuf::from)
        .unwrap_or_else(score::corpus_dir);
    let score = score::score_corpus(&dir);
    print!("{}", score.table());
    if args.iter().any(|a| a == "--misses") {
        println!();
        print!("{}", score.problems());
    }
}
