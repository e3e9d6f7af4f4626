//! One decompressor, several readers: the decompressed bytes of a trace are handed, chunk by
//! chunk, to every reader, each of which parses the whole capture on its own thread (readers
//! that split the flows between them). The decompressor runs once instead of once per reader.

use std::io::{self, Read};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

/// Bytes handed over at a time.
const CHUNK_BYTES: usize = 1 << 20;
/// Chunks waiting per reader: the decompressor goes ahead of the slowest reader by at most
/// this many (memory: readers × this × CHUNK_BYTES).
const CHUNKS_AHEAD: usize = 4;

enum Message {
    Chunk(Arc<[u8]>),
    /// The input failed here; every reader reports it at the same byte.
    Failed(io::ErrorKind, String),
}

/// `n` streams each carrying every byte `input` gives, read by one thread. The thread ends at
/// the end of `input`, at its first error, or when every stream has been dropped.
pub(crate) fn tee(mut input: Box<dyn Read + Send>, n: usize) -> io::Result<Vec<TeeReader>> {
    let (senders, readers): (Vec<SyncSender<Message>>, Vec<TeeReader>) = (0..n)
        .map(|_| {
            let (tx, rx) = sync_channel(CHUNKS_AHEAD);
            (tx, TeeReader { rx, chunk: Arc::from(Vec::new()), at: 0, failed: None, ended: false })
        })
        .unzip();
    std::thread::Builder::new().name("sonde-decompress".into()).spawn(move || {
        let mut senders: Vec<Option<SyncSender<Message>>> = senders.into_iter().map(Some).collect();
        // A reader that went away (stopped early) is left out; the others go on.
        let mut send = |make: &dyn Fn() -> Message| {
            for slot in &mut senders {
                if slot.as_ref().is_some_and(|tx| tx.send(make()).is_err()) {
                    *slot = None;
                }
            }
            senders.iter().any(Option::is_some)
        };
        loop {
            let (chunk, failed) = fill_chunk(&mut input);
            let at_end = chunk.len() < CHUNK_BYTES;
            if !chunk.is_empty() {
                let chunk: Arc<[u8]> = chunk.into();
                if !send(&|| Message::Chunk(chunk.clone())) {
                    return;
                }
            }
            if let Some(e) = failed {
                let text = e.to_string();
                send(&|| Message::Failed(e.kind(), text.clone()));
                return;
            }
            if at_end {
                return;
            }
        }
    })?;
    Ok(readers)
}

/// Up to CHUNK_BYTES from `input`, fewer only at its end or at an error, which comes with the
/// bytes read before it (every frame before a damage is read, as with one reader).
fn fill_chunk(input: &mut dyn Read) -> (Vec<u8>, Option<io::Error>) {
    let mut chunk = Vec::with_capacity(CHUNK_BYTES);
    let failed = input.take(CHUNK_BYTES as u64).read_to_end(&mut chunk).err();
    (chunk, failed)
}

/// One reader's copy of the stream.
pub(crate) struct TeeReader {
    rx: Receiver<Message>,
    chunk: Arc<[u8]>,
    at: usize,
    failed: Option<(io::ErrorKind, String)>,
    ended: bool,
}

impl Read for TeeReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.at == self.chunk.len() {
            if let Some((kind, text)) = &self.failed {
                return Err(io::Error::new(*kind, text.clone()));
            }
            if self.ended {
                return Ok(0);
            }
            match self.rx.recv() {
                Ok(Message::Chunk(chunk)) => (self.chunk, self.at) = (chunk, 0),
                Ok(Message::Failed(kind, text)) => self.failed = Some((kind, text)),
                // The decompressor ended: the whole input was handed over.
                Err(_) => self.ended = true,
            }
        }
        let n = out.len().min(self.chunk.len() - self.at);
        out[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream that gives `data` in pieces of `step` bytes, then fails if asked to.
    struct Pieces {
        data: Vec<u8>,
        at: usize,
        step: usize,
        fail_at_end: bool,
    }

    impl Read for Pieces {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            if self.at == self.data.len() {
                return if self.fail_at_end {
                    Err(io::Error::new(io::ErrorKind::InvalidData, "bad block"))
                } else {
                    Ok(0)
                };
            }
            let n = out.len().min(self.step).min(self.data.len() - self.at);
            out[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn every_reader_gets_every_byte_in_order() {
        let data = data(3 * CHUNK_BYTES + 12_345);
        let input = Pieces { data: data.clone(), at: 0, step: 65_521, fail_at_end: false };
        let readers = tee(Box::new(input), 3).unwrap();
        let threads: Vec<_> = readers
            .into_iter()
            .map(|mut r| {
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    r.read_to_end(&mut got).unwrap();
                    got
                })
            })
            .collect();
        for t in threads {
            assert!(t.join().unwrap() == data);
        }
    }

    #[test]
    fn an_error_reaches_every_reader_after_the_bytes_before_it() {
        let data = data(2 * CHUNK_BYTES + 1000);
        let input = Pieces { data: data.clone(), at: 0, step: 4096, fail_at_end: true };
        for mut r in tee(Box::new(input), 2).unwrap() {
            let mut got = vec![0; data.len()];
            r.read_exact(&mut got).unwrap();
            assert!(got == data);
            let e = r.read(&mut [0; 16]).unwrap_err();
            assert_eq!((e.kind(), e.to_string()), (io::ErrorKind::InvalidData, "bad block".to_string()));
        }
    }

    #[test]
    fn a_reader_that_stops_does_not_stop_the_others() {
        let data = data(CHUNK_BYTES * (CHUNKS_AHEAD + 4));
        let input = Pieces { data: data.clone(), at: 0, step: CHUNK_BYTES, fail_at_end: false };
        let mut readers = tee(Box::new(input), 2).unwrap();
        drop(readers.remove(0));
        let mut got = Vec::new();
        readers[0].read_to_end(&mut got).unwrap();
        assert!(got == data);
    }
}
