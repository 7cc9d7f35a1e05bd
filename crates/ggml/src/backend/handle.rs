//! The shape every handle over a `dyn` implementation shares.

/// Declares `pub struct $name(Arc<dyn $imp>)` with identity equality, a `Debug` that shows its
/// name, and `new` wrapping an implementation.
macro_rules! handle {
    ($(#[$doc:meta])* $name:ident: $imp:ident) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name(std::sync::Arc<dyn $imp>);

        impl PartialEq for $name {
            fn eq(&self, other: &$name) -> bool {
                std::ptr::addr_eq(std::sync::Arc::as_ptr(&self.0), std::sync::Arc::as_ptr(&other.0))
            }
        }
        impl Eq for $name {}

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self.name())
            }
        }

        impl $name {
            /// Wraps an implementation. Keep the returned handle and hand out clones: identity
            /// matters.
            pub fn new(imp: impl $imp) -> $name {
                $name(std::sync::Arc::new(imp))
            }
        }
    };
}
