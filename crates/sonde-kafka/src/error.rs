//! The one error of the Kafka export and control topics.

/// What went wrong talking to the brokers or reading what they hold: the message names the
/// brokers, the topic and the call (`kafka: no broker answered at …`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

sonde_types::message_error!(Error);

impl From<String> for Error {
    fn from(message: String) -> Error {
        Error(message)
    }
}

/// An [`Error`] of a message as `format!` makes it.
macro_rules! error {
    ($($message:tt)*) => {
        $crate::Error::from(format!($($message)*))
    };
}
