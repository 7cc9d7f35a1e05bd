//! `ggml tokenize MODEL.gguf -p TEXT [--pieces] [--no-bos] [--no-parse-special]`: the token ids
//! of TEXT under the model's vocabulary, as llama.cpp's `llama-tokenize` gives them (BOS/EOS as
//! the model asks unless `--no-bos`; special-token text parsed unless `--no-parse-special`).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;

use ggml::gguf::GgufFile;
use ggml_llm::Vocab;

use crate::CliError;

const USAGE: &str =
    "usage: ggml tokenize MODEL.gguf -p TEXT [--pieces] [--no-bos] [--no-parse-special]

  -p, --prompt TEXT    the text to tokenize
  --pieces             one line per token: `ID -> 'PIECE'` (default: the ids as [1, 2, 3])
  --no-bos             do not add the BOS/EOS/SEP tokens the model asks for
  --no-parse-special   treat the text of control tokens as plain text";

struct Args {
    model: PathBuf,
    prompt: String,
    pieces: bool,
    add_special: bool,
    parse_special: bool,
}

fn parse(args: &[OsString]) -> Result<Option<Args>, CliError> {
    let usage = |m: String| CliError::Usage(format!("{m}\n\n{USAGE}"));
    let (mut model, mut prompt) = (None, None);
    let (mut pieces, mut add_special, mut parse_special) = (false, true, true);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("-h" | "--help") => {
                println!("{USAGE}");
                return Ok(None);
            }
            Some("-p" | "--prompt") => {
                let v = it.next().ok_or_else(|| usage("-p needs a TEXT".into()))?;
                let v = v
                    .to_str()
                    .ok_or_else(|| usage(format!("TEXT {v:?} is not valid UTF-8")))?;
                prompt = Some(v.to_string());
            }
            Some("--pieces") => pieces = true,
            Some("--no-bos") => add_special = false,
            Some("--no-parse-special") => parse_special = false,
            Some(flag) if flag.starts_with('-') && flag.len() > 1 => {
                return Err(usage(format!("unknown option {flag}")))
            }
            _ if model.is_some() => {
                return Err(usage(format!(
                    "more than one MODEL given ({})",
                    a.to_string_lossy()
                )))
            }
            _ => model = Some(PathBuf::from(a)),
        }
    }
    Ok(Some(Args {
        model: model.ok_or_else(|| usage("tokenize needs a MODEL.gguf".into()))?,
        prompt: prompt.ok_or_else(|| usage("tokenize needs -p TEXT".into()))?,
        pieces,
        add_special,
        parse_special,
    }))
}

/// The output for `ids`: a bracketed list, or with `pieces` one `ID -> 'PIECE'` line each (a
/// piece that is not valid UTF-8, a partial byte of a character, is shown as its hex bytes).
fn render(vocab: &Vocab, ids: &[u32], pieces: bool) -> Result<String, CliError> {
    let mut out = String::new();
    if !pieces {
        let list: Vec<String> = ids.iter().map(u32::to_string).collect();
        return Ok(format!("[{}]\n", list.join(", ")));
    }
    for &id in ids {
        let piece = vocab
            .token_to_piece(id, true)
            .map_err(|e| CliError::Failed(e.to_string()))?;
        match std::str::from_utf8(piece) {
            Ok(s) => writeln!(out, "{id:6} -> '{s}'"),
            Err(_) => {
                let hex: Vec<String> = piece.iter().map(|b| format!("{b:02x}")).collect();
                writeln!(
                    out,
                    "{id:6} -> '<{}>' (utf-8 decode failure)",
                    hex.join(" ")
                )
            }
        }
        .expect("writing to a String");
    }
    Ok(out)
}

/// Runs `ggml tokenize ARGS…`.
pub fn run(args: &[OsString]) -> Result<(), CliError> {
    let Some(a) = parse(args)? else { return Ok(()) };
    let fail = |e: &dyn std::fmt::Display| CliError::Failed(format!("{}: {e}", a.model.display()));
    let file = GgufFile::open(&a.model).map_err(|e| fail(&e))?;
    let vocab = Vocab::from_gguf(&file).map_err(|e| fail(&e))?;
    let add_special = a.add_special && vocab.add_bos();
    let ids = vocab
        .tokenize(&a.prompt, add_special, a.parse_special)
        .map_err(|e| fail(&e))?;
    crate::write_stdout(&render(&vocab, &ids, a.pieces)?)
}
