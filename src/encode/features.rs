//! pahole's BTF features (`--btf_features=LIST`, `--btf_features_strict=LIST` and the
//! older switches they replaced): what to encode.
//!
//! The parse is pahole's `parse_btf_features`: the first list given turns every
//! feature off, then each list turns on what it names (so several lists add up); a
//! list that is exactly `default` or starts with `+` turns on the default set first;
//! a `default` item does too; unknown names are ignored (newer build scripts must
//! work with older encoders) unless the list is strict. The older switches
//! (`--skip_encoding_btf_vars`, `--btf_gen_floats` …) set one feature each, where they
//! stand on the command line: before the first list they are undone by it.

/// The feature switches pahole v1.31 knows.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Features {
    /// `encode_force`: skip what cannot be encoded instead of failing.
    pub encode_force: bool,
    /// `var`: per-CPU variables.
    pub var: bool,
    /// `float`: FLOAT kind (otherwise floats are INTs without encoding).
    pub float: bool,
    /// `decl_tag`: `btf_decl_tag` annotations as DECL_TAG.
    pub decl_tag: bool,
    /// `type_tag`: `btf_type_tag` annotations as TYPE_TAG.
    pub type_tag: bool,
    /// `enum64`: ENUM64 kind (otherwise 64-bit enums are truncated ENUMs).
    pub enum64: bool,
    /// `optimized_func`: encode optimized functions (`.isra` …).
    pub optimized_func: bool,
    /// `consistent_func`: skip functions with inconsistent prototypes.
    pub consistent_func: bool,
    /// `decl_tag_kfuncs`: `bpf_kfunc` decl tags from `.BTF_ids`.
    pub decl_tag_kfuncs: bool,
    /// `reproducible_build`: output independent of `-j`.
    pub reproducible_build: bool,
    /// `distilled_base`: write `.BTF.base` for modules.
    pub distilled_base: bool,
    /// `global_var`: all global variables.
    pub global_var: bool,
    /// `attributes`: type attributes as tags with kflag.
    pub attributes: bool,
    /// `true_signature`: prototypes of optimized functions as they are called.
    pub true_signature: bool,
    /// `layout`: the BTF layout section (kind sizes) in the header.
    pub layout: bool,
}

/// Names, in pahole's order, with whether `default` includes them.
const NAMES: &[(&str, bool)] = &[
    ("encode_force", true),
    ("var", true),
    ("float", true),
    ("decl_tag", true),
    ("type_tag", true),
    ("enum64", true),
    ("optimized_func", true),
    ("consistent_func", true),
    ("decl_tag_kfuncs", true),
    ("reproducible_build", false),
    ("distilled_base", false),
    ("global_var", false),
    ("attributes", false),
    ("true_signature", false),
    ("layout", false),
];

impl Features {
    /// What `pahole -J` encodes without `--btf_features`: variables, tags and
    /// ENUM64, but no FLOAT.
    pub fn pahole_defaults() -> Features {
        Features {
            var: true,
            decl_tag: true,
            type_tag: true,
            enum64: true,
            ..Features::default()
        }
    }

    fn flag(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "encode_force" => &mut self.encode_force,
            "var" => &mut self.var,
            "float" => &mut self.float,
            "decl_tag" => &mut self.decl_tag,
            "type_tag" => &mut self.type_tag,
            "enum64" => &mut self.enum64,
            "optimized_func" => &mut self.optimized_func,
            "consistent_func" => &mut self.consistent_func,
            "decl_tag_kfuncs" => &mut self.decl_tag_kfuncs,
            "reproducible_build" => &mut self.reproducible_build,
            "distilled_base" => &mut self.distilled_base,
            "global_var" => &mut self.global_var,
            "attributes" => &mut self.attributes,
            "true_signature" => &mut self.true_signature,
            "layout" => &mut self.layout,
            _ => return None,
        })
    }

    /// Features from one `--btf_features=LIST` (see [`FeatureArgs`]).
    pub fn from_list(list: &str) -> Features {
        let mut a = FeatureArgs::new();
        a.btf_features(list, false)
            .expect("a list that is not strict is never refused");
        a.finish()
    }

    /// The features that are on, by name, in pahole's order.
    pub fn names(&self) -> Vec<&'static str> {
        let mut f = self.clone();
        NAMES
            .iter()
            .filter(|(n, _)| *f.flag(n).expect("known feature"))
            .map(|(n, _)| *n)
            .collect()
    }
}

/// What `--supported_btf_features` prints: every feature (we implement all that
/// pahole knows), in pahole's order and format (comma-separated).
pub fn supported_list() -> String {
    NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(",")
}

/// A strict list named a feature we do not know: pahole's message, which lists the
/// features it knows, and its exit status 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedFeature {
    /// The unknown name.
    pub name: String,
    /// The list it was in (without a leading `+`).
    pub list: String,
}

impl std::fmt::Display for UnsupportedFeature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Feature '{}' in '{}' is not supported.  Supported BTF features are:\n{}",
            self.name,
            self.list,
            supported_list()
        )
    }
}

/// The feature state while a command line is read, option by option.
#[derive(Clone, Debug)]
pub struct FeatureArgs {
    features: Features,
    /// Whether a list was given (the first one turns every feature off).
    listed: bool,
}

impl Default for FeatureArgs {
    fn default() -> Self {
        FeatureArgs::new()
    }
}

/// pahole copies a list into a buffer of this many bytes before splitting it.
const MAX_LIST: usize = 1024;

impl FeatureArgs {
    /// pahole's state before any option: [`Features::pahole_defaults`].
    pub fn new() -> FeatureArgs {
        FeatureArgs {
            features: Features::pahole_defaults(),
            listed: false,
        }
    }

    /// The features, for an older switch that sets one of them.
    pub fn features_mut(&mut self) -> &mut Features {
        &mut self.features
    }

    /// One `--btf_features` (`strict`: `--btf_features_strict`) list. Returns the
    /// items ignored, which pahole names under `--verbose` ("Ignoring unsupported
    /// feature"; pahole says so of a `default` item too, after honouring it).
    pub fn btf_features(
        &mut self,
        list: &str,
        strict: bool,
    ) -> Result<Vec<String>, UnsupportedFeature> {
        if !self.listed {
            self.features = Features::default();
            self.listed = true;
        }
        if list == "default" {
            self.enable_default();
            return Ok(Vec::new());
        }
        let list = match list.strip_prefix('+') {
            Some(rest) => {
                self.enable_default();
                rest
            }
            None => list,
        };
        let mut cut = list.len().min(MAX_LIST);
        while !list.is_char_boundary(cut) {
            cut -= 1;
        }
        let mut ignored = Vec::new();
        // strtok: empty items between commas are skipped.
        for name in list[..cut].split(',').filter(|n| !n.is_empty()) {
            if let Some(b) = self.features.flag(name) {
                *b = true;
                continue;
            }
            if name == "default" {
                self.enable_default();
            } else if strict {
                return Err(UnsupportedFeature {
                    name: name.to_string(),
                    list: list.to_string(),
                });
            }
            ignored.push(name.to_string());
        }
        Ok(ignored)
    }

    fn enable_default(&mut self) {
        for &(n, dflt) in NAMES {
            if dflt {
                *self.features.flag(n).expect("known feature") = true;
            }
        }
    }

    /// The features in effect.
    pub fn finish(self) -> Features {
        self.features
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(lists: &[(&str, bool)]) -> Result<Features, UnsupportedFeature> {
        let mut a = FeatureArgs::new();
        for &(l, strict) in lists {
            a.btf_features(l, strict)?;
        }
        Ok(a.finish())
    }

    #[test]
    fn lists() {
        let f = Features::from_list("float,enum64,bogus_feature");
        assert!(f.float && f.enum64 && !f.var && !f.type_tag);
        let d = Features::from_list("default");
        assert!(d.encode_force && d.decl_tag_kfuncs && !d.global_var);
        assert_eq!(
            d.names(),
            [
                "encode_force",
                "var",
                "float",
                "decl_tag",
                "type_tag",
                "enum64",
                "optimized_func",
                "consistent_func",
                "decl_tag_kfuncs"
            ]
        );
        let k = Features::from_list("default,global_var");
        assert!(k.global_var && k.var);
        // pahole knows no `all`: it is ignored like any unknown name.
        assert_eq!(Features::from_list("all"), Features::default());
        // Names are not trimmed; empty items are skipped.
        assert_eq!(Features::from_list(" var,,float").names(), ["float"]);
    }

    #[test]
    fn plus_and_repeated_lists() {
        let mut want = Features::from_list("default");
        want.reproducible_build = true;
        assert_eq!(Features::from_list("+reproducible_build"), want);
        // Only a leading `+` counts.
        assert_eq!(
            Features::from_list("var,+float").names(),
            ["var"],
            "`+float` is an unknown name"
        );
        let f = parse(&[("var", false), ("distilled_base", false)]).unwrap();
        assert_eq!(f.names(), ["var", "distilled_base"]);
        let f = parse(&[("layout", false), ("+global_var", false)]).unwrap();
        assert!(f.layout && f.global_var && f.consistent_func);
    }

    #[test]
    fn unknown_names_and_strict() {
        let mut a = FeatureArgs::new();
        assert_eq!(
            a.btf_features("var,no_such,default", false).unwrap(),
            ["no_such", "default"]
        );
        assert_eq!(a.finish(), Features::from_list("default"));
        let e = parse(&[("+var,no_such", true)]).unwrap_err();
        assert_eq!(e.name, "no_such");
        assert_eq!(e.list, "var,no_such");
        let msg = e.to_string();
        assert!(msg.starts_with("Feature 'no_such' in 'var,no_such' is not supported.  Supported BTF features are:\nencode_force,var,"), "{msg}");
        assert!(msg.ends_with(",attributes,true_signature,layout"), "{msg}");
        // A `default` item is allowed in a strict list; `all` is not.
        assert!(parse(&[("var,default", true)]).is_ok());
        assert!(parse(&[("all", true)]).is_err());
        assert!(parse(&[("default", true)]).is_ok());
    }

    #[test]
    fn long_lists_are_cut_as_pahole_cuts_them() {
        let long = format!("{},float", ",".repeat(MAX_LIST - 6));
        assert!(Features::from_list(&long).float);
        let long = format!("{},float", ",".repeat(MAX_LIST - 5));
        assert!(!Features::from_list(&long).float);
    }
}
