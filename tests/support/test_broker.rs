//! A broker serving real TCP on an ephemeral port, as `samsa broker` runs it (a node with a
//! metadata quorum of one and its controller, `broker::node`), and a connection speaking
//! Samsa's own codec, for integration tests that need the whole request path (framing, handlers, the
//! connection's write loop). Shared by `tests/broker/api.rs` and `tests/broker/fetch_zero_copy.rs`.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use samsa::broker::config::BrokerConfig;
use samsa::broker::node::Node;
use samsa::broker::{server, Broker};
use samsa::protocol::create_topics::{
    CreatableTopic, CreatableTopicConfig, CreateTopicsRequest, CreateTopicsResponse,
};
use samsa::protocol::header::{RequestHeader, ResponseHeader};
use samsa::protocol::message::Message;
use samsa::protocol::produce::{
    PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData,
};
use samsa::protocol::{request_header_version, response_header_version};
use samsa::rt::clock::Clock;
use samsa::rt::disk::Disk;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub struct TestBroker {
    pub addr: SocketAddr,
    stop: Arc<samsa::rt::latch::Latch>,
    serving: tokio::task::JoinHandle<()>,
    /// The broker's background work, when the test asked for it.
    background: Option<tokio::task::JoinHandle<()>>,
    pub broker: Arc<Broker>,
    pub node: samsa::broker::node::Node,
}

impl TestBroker {
    pub async fn start(dir: &std::path::Path, overrides: &[(&str, &str)]) -> TestBroker {
        TestBroker::open(dir, overrides, false).await
    }

    /// A broker that also runs its background work as `samsa broker` does: the flusher,
    /// retention, the scrubber, and the group coordinator's load and timers (rebalance
    /// delays, sessions, offset expiry).
    pub async fn start_with_background(
        dir: &std::path::Path,
        overrides: &[(&str, &str)],
    ) -> TestBroker {
        TestBroker::open(dir, overrides, true).await
    }

    async fn open(
        dir: &std::path::Path,
        overrides: &[(&str, &str)],
        background: bool,
    ) -> TestBroker {
        let mut pairs: Vec<(String, String)> = vec![(
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        )];
        pairs.extend(
            overrides
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        let mut config = BrokerConfig::load(None, &pairs).expect("test config is valid");
        let listener = samsa::rt::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        // Metadata must advertise the port actually bound.
        for endpoint in config.advertised_listeners.iter_mut() {
            endpoint.port = addr.port();
        }
        let controller_listener = samsa::rt::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap();
        let disk = Disk::real(dir).unwrap();
        let node = Node::start(
            config,
            disk.clone(),
            disk,
            Clock::new(),
            controller_listener,
        )
        .await
        .expect("node starts");
        let broker = node.broker.clone();
        let stop = Arc::new(samsa::rt::latch::Latch::new());
        let serving = samsa::rt::task::spawn(server::serve(broker.clone(), listener, stop.clone()));
        let background =
            background.then(|| samsa::rt::task::spawn(broker.clone().run_background(stop.clone())));
        TestBroker {
            addr,
            stop,
            serving,
            background,
            broker,
            node,
        }
    }

    pub async fn stop(self) {
        self.stop.set();
        self.serving.await.unwrap();
        if let Some(background) = self.background {
            background.await.unwrap();
        }
        drop(self.broker);
        self.node.shutdown().await.unwrap();
    }

    pub async fn connect(&self) -> Conn {
        Conn {
            stream: TcpStream::connect(self.addr).await.unwrap(),
            correlation_id: 0,
        }
    }
}

pub struct Conn {
    stream: TcpStream,
    correlation_id: i32,
}

impl Conn {
    pub async fn send_frame(&mut self, frame: &[u8]) {
        self.stream
            .write_all(&(frame.len() as u32).to_be_bytes())
            .await
            .unwrap();
        self.stream.write_all(frame).await.unwrap();
    }

    /// The next response frame, or `None` if the broker closed the connection.
    pub async fn read_frame(&mut self) -> Option<Bytes> {
        let mut prefix = [0u8; 4];
        self.stream.read_exact(&mut prefix).await.ok()?;
        let mut body = vec![0u8; u32::from_be_bytes(prefix) as usize];
        self.stream.read_exact(&mut body).await.ok()?;
        Some(Bytes::from(body))
    }

    pub fn request<Req: Message>(&mut self, version: i16, request: &Req) -> BytesMut {
        self.correlation_id += 1;
        let header = RequestHeader {
            request_api_key: Req::API_KEY,
            request_api_version: version,
            correlation_id: self.correlation_id,
            client_id: Some("test-broker".to_string()),
        };
        let header_version = request_header_version(Req::API_KEY, version).unwrap();
        let mut out = BytesMut::new();
        header.encode(&mut out, header_version).unwrap();
        request.encode(&mut out, version).unwrap();
        out
    }

    /// Sends a request and decodes its response, checking the correlation id.
    pub async fn call<Req: Message, Resp: Message>(&mut self, version: i16, request: &Req) -> Resp {
        let frame = self.request(version, request);
        self.send_frame(&frame).await;
        let mut reply = self.read_frame().await.expect("broker answered");
        let header_version = response_header_version(Req::API_KEY, version).unwrap();
        let header = ResponseHeader::decode(
            &mut samsa::protocol::wire::Reader::new(reply.clone()),
            header_version,
        )
        .unwrap();
        assert_eq!(header.correlation_id, self.correlation_id);
        reply.advance(header.encoded_len(header_version));
        Resp::decode_exact(reply, version).expect("response decodes")
    }
}

pub fn topic(name: &str, partitions: i32, configs: &[(&str, &str)]) -> CreatableTopic {
    CreatableTopic {
        name: name.to_string(),
        num_partitions: partitions,
        replication_factor: -1,
        configs: configs
            .iter()
            .map(|(k, v)| CreatableTopicConfig {
                name: k.to_string(),
                value: Some(v.to_string()),
            })
            .collect(),
        ..Default::default()
    }
}

/// Creates one topic; returns its error code.
pub async fn create(conn: &mut Conn, topic: CreatableTopic) -> i16 {
    let response: CreateTopicsResponse = conn
        .call(
            7,
            &CreateTopicsRequest {
                topics: vec![topic],
                timeout_ms: 10_000,
                validate_only: false,
            },
        )
        .await;
    response.topics[0].error_code
}

/// Produces with acks=-1 to one partition: (error code, base offset).
pub async fn produce(conn: &mut Conn, topic: &str, partition: i32, records: Bytes) -> (i16, i64) {
    let request = ProduceRequest {
        acks: -1,
        timeout_ms: 10_000,
        topic_data: vec![TopicProduceData {
            name: topic.to_string(),
            partition_data: vec![PartitionProduceData {
                index: partition,
                records: Some(records),
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let response: ProduceResponse = conn.call(9, &request).await;
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset.0)
}
