//! llama.cpp's file types (`enum llama_ftype`): the mixes `llama-quantize` takes by name, the
//! number stored in `general.file_type`, the tensor type each mix starts from, and the name
//! llama.cpp's tools print for it.

use ggml::Type;

/// A llama.cpp file type (`LLAMA_FTYPE_*`); the discriminant is the value of
/// `general.file_type`.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ftype {
    AllF32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q8_0 = 7,
    Q5_0 = 8,
    Q5_1 = 9,
    Q2_K = 10,
    Q3_K_S = 11,
    Q3_K_M = 12,
    Q3_K_L = 13,
    Q4_K_S = 14,
    Q4_K_M = 15,
    Q5_K_S = 16,
    Q5_K_M = 17,
    Q6_K = 18,
    IQ2_XXS = 19,
    IQ2_XS = 20,
    Q2_K_S = 21,
    IQ3_XS = 22,
    IQ3_XXS = 23,
    IQ1_S = 24,
    IQ4_NL = 25,
    IQ3_S = 26,
    IQ3_M = 27,
    IQ2_S = 28,
    IQ2_M = 29,
    IQ4_XS = 30,
    IQ1_M = 31,
    BF16 = 32,
    TQ1_0 = 36,
    TQ2_0 = 37,
    MXFP4_MOE = 38,
    NVFP4 = 39,
    Q1_0 = 40,
    Q2_0 = 41,
}

/// The bit llama.cpp sets on a file type it guessed from the tensors (`LLAMA_FTYPE_GUESSED`).
const GUESSED: u32 = 1024;

/// Every file type, with its tensor type to start from (`llama_ftype_get_default_type`; `None`
/// where llama.cpp cannot quantize to it) and its description (`llama_ftype_name`).
const TABLE: [(Ftype, Option<Type>, &str); 36] = {
    use Ftype as F;
    [
        (F::AllF32, Some(Type::F32), "all F32"),
        (F::F16, Some(Type::F16), "F16"),
        (F::Q4_0, Some(Type::Q4_0), "Q4_0"),
        (F::Q4_1, Some(Type::Q4_1), "Q4_1"),
        (F::Q8_0, Some(Type::Q8_0), "Q8_0"),
        (F::Q5_0, Some(Type::Q5_0), "Q5_0"),
        (F::Q5_1, Some(Type::Q5_1), "Q5_1"),
        (F::Q2_K, Some(Type::Q2_K), "Q2_K - Medium"),
        (F::Q3_K_S, Some(Type::Q3_K), "Q3_K - Small"),
        (F::Q3_K_M, Some(Type::Q3_K), "Q3_K - Medium"),
        (F::Q3_K_L, Some(Type::Q3_K), "Q3_K - Large"),
        (F::Q4_K_S, Some(Type::Q4_K), "Q4_K - Small"),
        (F::Q4_K_M, Some(Type::Q4_K), "Q4_K - Medium"),
        (F::Q5_K_S, Some(Type::Q5_K), "Q5_K - Small"),
        (F::Q5_K_M, Some(Type::Q5_K), "Q5_K - Medium"),
        (F::Q6_K, Some(Type::Q6_K), "Q6_K"),
        (F::IQ2_XXS, Some(Type::IQ2_XXS), "IQ2_XXS - 2.0625 bpw"),
        (F::IQ2_XS, Some(Type::IQ2_XS), "IQ2_XS - 2.3125 bpw"),
        (F::Q2_K_S, Some(Type::Q2_K), "Q2_K - Small"),
        (F::IQ3_XS, Some(Type::IQ3_S), "IQ3_XS - 3.3 bpw"),
        (F::IQ3_XXS, Some(Type::IQ3_XXS), "IQ3_XXS - 3.0625 bpw"),
        (F::IQ1_S, Some(Type::IQ1_S), "IQ1_S - 1.5625 bpw"),
        (F::IQ4_NL, Some(Type::IQ4_NL), "IQ4_NL - 4.5 bpw"),
        (F::IQ3_S, Some(Type::IQ3_S), "IQ3_S - 3.4375 bpw"),
        (F::IQ3_M, Some(Type::IQ3_S), "IQ3_S mix - 3.66 bpw"),
        (F::IQ2_S, Some(Type::IQ2_XS), "IQ2_S - 2.5 bpw"),
        (F::IQ2_M, Some(Type::IQ2_S), "IQ2_M - 2.7 bpw"),
        (F::IQ4_XS, Some(Type::IQ4_XS), "IQ4_XS - 4.25 bpw"),
        (F::IQ1_M, Some(Type::IQ1_M), "IQ1_M - 1.75 bpw"),
        (F::BF16, Some(Type::BF16), "BF16"),
        (F::TQ1_0, Some(Type::TQ1_0), "TQ1_0 - 1.69 bpw ternary"),
        (F::TQ2_0, Some(Type::TQ2_0), "TQ2_0 - 2.06 bpw ternary"),
        (F::MXFP4_MOE, Some(Type::MXFP4), "MXFP4 MoE"),
        (F::NVFP4, None, "NVFP4"),
        (F::Q1_0, Some(Type::Q1_0), "Q1_0"),
        (F::Q2_0, Some(Type::Q2_0), "Q2_0"),
    ]
};

/// The names `llama-quantize` accepts, in its order (its `QUANT_OPTIONS`), with a line of help.
/// `Q3_K`, `Q4_K` and `Q5_K` are its aliases of the `_M` mixes; `COPY` copies every tensor.
/// NVFP4 has a file type but no name here, as in llama-quantize.
pub const QUANTIZE_NAMES: [(&str, Ftype, &str); 39] = {
    use Ftype as F;
    [
        ("Q1_0", F::Q1_0, "1.125 bpw"),
        ("Q2_0", F::Q2_0, "2.25 bpw (group 64)"),
        ("Q4_0", F::Q4_0, "4.34G, +0.4685 ppl @ Llama-3-8B"),
        ("Q4_1", F::Q4_1, "4.78G, +0.4511 ppl @ Llama-3-8B"),
        (
            "MXFP4_MOE",
            F::MXFP4_MOE,
            "MXFP4 for MoE experts, Q8_0 elsewhere",
        ),
        ("Q5_0", F::Q5_0, "5.21G, +0.1316 ppl @ Llama-3-8B"),
        ("Q5_1", F::Q5_1, "5.65G, +0.1062 ppl @ Llama-3-8B"),
        ("IQ2_XXS", F::IQ2_XXS, "2.06 bpw (needs an imatrix)"),
        ("IQ2_XS", F::IQ2_XS, "2.31 bpw (needs an imatrix)"),
        ("IQ2_S", F::IQ2_S, "2.5 bpw (needs an imatrix)"),
        ("IQ2_M", F::IQ2_M, "2.7 bpw (needs an imatrix)"),
        ("IQ1_S", F::IQ1_S, "1.56 bpw (needs an imatrix)"),
        ("IQ1_M", F::IQ1_M, "1.75 bpw (needs an imatrix)"),
        ("TQ1_0", F::TQ1_0, "1.69 bpw ternary"),
        ("TQ2_0", F::TQ2_0, "2.06 bpw ternary"),
        ("Q2_K", F::Q2_K, "2.96G, +3.5199 ppl @ Llama-3-8B"),
        (
            "Q2_K_S",
            F::Q2_K_S,
            "2.96G, +3.1836 ppl @ Llama-3-8B (needs an imatrix)",
        ),
        ("IQ3_XXS", F::IQ3_XXS, "3.06 bpw (needs an imatrix)"),
        ("IQ3_S", F::IQ3_S, "3.44 bpw"),
        ("IQ3_M", F::IQ3_M, "3.66 bpw mix"),
        ("Q3_K", F::Q3_K_M, "alias for Q3_K_M"),
        ("IQ3_XS", F::IQ3_XS, "3.3 bpw"),
        ("Q3_K_S", F::Q3_K_S, "3.41G, +1.6321 ppl @ Llama-3-8B"),
        ("Q3_K_M", F::Q3_K_M, "3.74G, +0.6569 ppl @ Llama-3-8B"),
        ("Q3_K_L", F::Q3_K_L, "4.03G, +0.5562 ppl @ Llama-3-8B"),
        ("IQ4_NL", F::IQ4_NL, "4.50 bpw non-linear"),
        ("IQ4_XS", F::IQ4_XS, "4.25 bpw non-linear"),
        ("Q4_K", F::Q4_K_M, "alias for Q4_K_M"),
        ("Q4_K_S", F::Q4_K_S, "4.37G, +0.2689 ppl @ Llama-3-8B"),
        ("Q4_K_M", F::Q4_K_M, "4.58G, +0.1754 ppl @ Llama-3-8B"),
        ("Q5_K", F::Q5_K_M, "alias for Q5_K_M"),
        ("Q5_K_S", F::Q5_K_S, "5.21G, +0.1049 ppl @ Llama-3-8B"),
        ("Q5_K_M", F::Q5_K_M, "5.33G, +0.0569 ppl @ Llama-3-8B"),
        ("Q6_K", F::Q6_K, "6.14G, +0.0217 ppl @ Llama-3-8B"),
        ("Q8_0", F::Q8_0, "7.96G, +0.0026 ppl @ Llama-3-8B"),
        ("F16", F::F16, "14.00G, +0.0020 ppl @ Mistral-7B"),
        ("BF16", F::BF16, "14.00G, -0.0050 ppl @ Mistral-7B"),
        ("F32", F::AllF32, "26.00G @ 7B"),
        ("COPY", F::AllF32, "only copy tensors, no quantizing"),
    ]
};

/// What a `TYPE` argument names: a mix, or `COPY`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The file type.
    pub ftype: Ftype,
    /// The canonical name (`Q4_K_M` for `q4_k_m`; `Q4_K` stays `Q4_K`).
    pub name: &'static str,
    /// `COPY`: every tensor is copied as it is.
    pub only_copy: bool,
}

impl Ftype {
    /// The file type stored as `id` in `general.file_type` (the guessed bit ignored).
    pub fn from_id(id: u32) -> Option<Ftype> {
        TABLE
            .iter()
            .map(|&(f, _, _)| f)
            .find(|&f| f as u32 == id & !GUESSED)
    }

    /// The tensor type the mix starts from; `None` for NVFP4, which llama.cpp does not make.
    pub fn default_type(self) -> Option<Type> {
        self.entry().1
    }

    /// llama.cpp's description (`llama_ftype_name`), e.g. `Q4_K - Medium`.
    pub fn description(self) -> &'static str {
        self.entry().2
    }

    fn entry(self) -> &'static (Ftype, Option<Type>, &'static str) {
        TABLE
            .iter()
            .find(|(f, _, _)| *f == self)
            .expect("TABLE lists every Ftype")
    }

    /// Parses a `TYPE` argument as `llama-quantize` does: a name of [`QUANTIZE_NAMES`] in any
    /// case, else a file type number.
    pub fn parse(arg: &str) -> Option<Choice> {
        let by_name = QUANTIZE_NAMES
            .iter()
            .find(|(name, ..)| name.eq_ignore_ascii_case(arg));
        let by_id = || {
            let id: u32 = arg.parse().ok()?;
            QUANTIZE_NAMES.iter().find(|(_, f, _)| *f as u32 == id)
        };
        let &(name, ftype, _) = by_name.or_else(by_id)?;
        Some(Choice {
            ftype,
            name,
            only_copy: name == "COPY",
        })
    }
}

/// The name llama.cpp's tools print for the `general.file_type` value `id` (`Q4_K - Medium`);
/// a guessed type says so, an unknown number is `unknown file type`.
pub fn describe_file_type(id: i128) -> String {
    let known = u32::try_from(id).ok().and_then(|id| {
        let f = Ftype::from_id(id)?;
        let guessed = if id & GUESSED != 0 { "(guessed) " } else { "" };
        Some(format!("{guessed}{}", f.description()))
    });
    known.unwrap_or_else(|| "unknown file type".to_string())
}

/// The file type llama.cpp guesses for a file without `general.file_type`: the mix of the type
/// most tensors have (the first to reach the largest count), with the guessed bit set.
pub fn guess(types: impl IntoIterator<Item = Type>) -> u32 {
    use Ftype as F;
    let mut counts = [0u32; ggml::types::TYPE_COUNT as usize];
    let (mut best, mut best_count) = (Type::F32, 0);
    for t in types {
        let c = &mut counts[t as usize];
        *c += 1;
        if *c > best_count {
            (best, best_count) = (t, *c);
        }
    }
    let f = match best {
        Type::F16 => F::F16,
        Type::BF16 => F::BF16,
        Type::Q4_0 => F::Q4_0,
        Type::Q4_1 => F::Q4_1,
        Type::Q5_0 => F::Q5_0,
        Type::Q5_1 => F::Q5_1,
        Type::Q8_0 => F::Q8_0,
        Type::Q2_K => F::Q2_K,
        Type::Q3_K => F::Q3_K_M,
        Type::Q4_K => F::Q4_K_M,
        Type::Q5_K => F::Q5_K_M,
        Type::Q6_K => F::Q6_K,
        Type::TQ1_0 => F::TQ1_0,
        Type::TQ2_0 => F::TQ2_0,
        Type::IQ2_XXS => F::IQ2_XXS,
        Type::IQ2_XS => F::IQ2_XS,
        Type::IQ2_S => F::IQ2_S,
        Type::IQ3_XXS => F::IQ3_XXS,
        Type::IQ1_S => F::IQ1_S,
        Type::IQ1_M => F::IQ1_M,
        Type::IQ4_NL => F::IQ4_NL,
        Type::IQ4_XS => F::IQ4_XS,
        Type::IQ3_S => F::IQ3_S,
        Type::NVFP4 => F::NVFP4,
        Type::Q1_0 => F::Q1_0,
        Type::Q2_0 => F::Q2_0,
        _ => F::AllF32,
    };
    f as u32 | GUESSED
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_in_any_case_and_by_number() {
        let c = Ftype::parse("q4_k_m").unwrap();
        assert_eq!(
            (c.ftype, c.name, c.only_copy),
            (Ftype::Q4_K_M, "Q4_K_M", false)
        );
        assert_eq!(Ftype::parse("Q4_K").unwrap().ftype, Ftype::Q4_K_M, "alias");
        assert_eq!(Ftype::parse("q5_k").unwrap().ftype, Ftype::Q5_K_M, "alias");
        assert_eq!(
            Ftype::parse("15").unwrap().name,
            "Q4_K",
            "the first name for 15"
        );
        assert_eq!(Ftype::parse("0").unwrap().name, "F32", "F32 before COPY");
        assert!(Ftype::parse("copy").unwrap().only_copy);
        for bad in ["q4_k_x", "", "99", "NVFP4", "39", "q8_1"] {
            assert_eq!(Ftype::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn default_types_and_descriptions_follow_llama_cpp() {
        assert_eq!(Ftype::IQ2_S.default_type(), Some(Type::IQ2_XS));
        assert_eq!(Ftype::IQ2_M.default_type(), Some(Type::IQ2_S));
        assert_eq!(Ftype::IQ3_XS.default_type(), Some(Type::IQ3_S));
        assert_eq!(Ftype::Q2_K_S.default_type(), Some(Type::Q2_K));
        assert_eq!(Ftype::MXFP4_MOE.default_type(), Some(Type::MXFP4));
        assert_eq!(describe_file_type(15), "Q4_K - Medium");
        assert_eq!(describe_file_type(1024 + 7), "(guessed) Q8_0");
        assert_eq!(describe_file_type(4), "unknown file type");
        assert_eq!(describe_file_type(-1), "unknown file type");
        for (f, ..) in TABLE {
            assert_eq!(Ftype::from_id(f as u32), Some(f));
        }
        let guessed = |types: &[Type]| guess(types.iter().copied()) & !GUESSED;
        assert_eq!(
            guessed(&[Type::F32, Type::Q4_K, Type::Q4_K]),
            Ftype::Q4_K_M as u32
        );
        assert_eq!(
            guessed(&[Type::Q6_K, Type::Q8_0]),
            Ftype::Q6_K as u32,
            "first wins a tie"
        );
        assert_eq!(guessed(&[Type::IQ2_XS]), Ftype::IQ2_XS as u32);
        assert_eq!(guessed(&[Type::IQ3_S]), Ftype::IQ3_S as u32);
        assert_eq!(guessed(&[Type::Q2_K]), Ftype::Q2_K as u32);
        assert_eq!(
            guessed(&[Type::I32]),
            Ftype::AllF32 as u32,
            "unknown: all F32"
        );
        assert_eq!(guessed(&[]), Ftype::AllF32 as u32);
        assert_eq!(guess([Type::F16]), Ftype::F16 as u32 | GUESSED);
    }
}
