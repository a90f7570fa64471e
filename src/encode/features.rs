//! pahole's BTF features (`--btf_features=LIST`): what to encode.

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

    /// Features from a `--btf_features` list: only the listed ones are on;
    /// `default` and `all` stand for sets; unknown names are ignored, as pahole
    /// ignores them (so newer build scripts work with older encoders).
    pub fn from_list(list: &str) -> Features {
        let mut f = Features::default();
        f.add_list(list);
        f
    }

    /// Turns on the features of a comma-separated list (see [`Features::from_list`]).
    pub fn add_list(&mut self, list: &str) {
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                "default" | "all" => {
                    for &(n, dflt) in NAMES {
                        if dflt || name == "all" {
                            *self.flag(n).expect("known feature") = true;
                        }
                    }
                }
                _ => {
                    if let Some(b) = self.flag(name) {
                        *b = true;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists() {
        let f = Features::from_list("float,enum64,bogus_feature");
        assert!(f.float && f.enum64 && !f.var && !f.type_tag);
        let d = Features::from_list("default");
        assert!(d.encode_force && d.decl_tag_kfuncs && !d.global_var);
        let a = Features::from_list("all");
        assert!(a.global_var && a.distilled_base && a.attributes && a.layout);
        let k = Features::from_list("default,global_var");
        assert!(k.global_var && k.var);
    }
}
