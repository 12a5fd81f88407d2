// SIP over UDP, TCP and TLS for the SIP provider: the sockets, the connections and the dispatch of
// what arrives to the `sip` package's transaction layer.
//
// Why not the `sip` package's own transports (sip 0.0.6, checked in its source):
// - its UDP socket and TCP/TLS servers are bound without an 'error' listener, so a port already
//   taken (or any later socket error) is an uncaught exception that ends the process;
// - its TLS client takes one set of TLS options for the whole stack and connects to the resolved IP
//   address: no server name per peer, so the certificate is checked against an IP address, and
//   one CA bundle serves every trunk;
// - it writes the UDP port in the Via of TCP and TLS requests (the TLS listener has another), and
//   never asks a peer to reuse the connection (RFC 5923 `alias`), which a TLS client without a
//   listener needs to receive the far end's BYE;
// - its send() picks the next hop from the Route header itself and rewrites strict routes, which
//   would undo the routing route-set.ts decides.
// No better-kept SIP stack for Node speaks UDP/TCP/TLS without a separate server (SIP.js and JsSIP
// are WebSocket user agents; drachtio needs its C++ server), so the package keeps what it does
// well, its parser, digest and RFC 3261 transactions (makeTransactionLayer takes the connection
// to send on), and this module owns the sockets.
import { randomBytes } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { createServer, connect as tcpConnect, type Server, type Socket } from 'node:net';
import { createRequire } from 'node:module';
import type * as tls from 'node:tls';
import type * as sip from 'sip';
import { isIpAddress, type Hop, type SipTransportName } from './route-set.js';

// node:tls is required on the first TLS connection, not imported: an ES import of it builds the
// module's namespace, which reads every export, `rootCertificates` too (Node's whole CA bundle as
// strings, kept for the life of the process), in every node, SIP or not.
const require = createRequire(import.meta.url);
const tlsConnect = (options: tls.ConnectionOptions): tls.TLSSocket => (require('node:tls') as typeof tls).connect(options);

type SipLibrary = typeof sip;

/** TLS checks for connections a route opens: the certificate must be valid for `serverName` and chain to `ca`. */
export interface TlsPolicy {
  /** The name the peer's certificate must carry (default: the hop's host name; its IP address when it has none). */
  serverName?: string;
  /** PEM CA certificates trusted instead of Node's bundled ones. */
  ca?: string;
}

export interface SipEndpointSettings {
  bindAddress: string;
  port: number;
  /** The host written in Via (and by the provider in Contact). */
  publicHost: string;
  /** How long an unused TCP or TLS connection stays open for reuse. */
  idleMs?: number;
  /** Largest message taken over a stream, headers and body each; a peer sending more is disconnected. */
  maxMessageBytes?: number;
}

type Protocol = 'UDP' | 'TCP' | 'TLS';
const protocolOf = (transport: SipTransportName): Protocol => transport.toUpperCase() as Protocol;

/** A TCP or TLS connection shared by the transactions and dialogs that use it. */
interface StreamConnection {
  socket: Socket;
  protocol: 'TCP' | 'TLS';
  key: string;
  refs: number;
  failed: Error | undefined;
  errorListeners: Set<(error: Error) => void>;
  idle: NodeJS.Timeout | undefined;
}

/**
 * Via parameters with a branch of 96 random bits that the transaction layer cannot overwrite. The
 * `sip` package assigns every client transaction `z9hG4bK` + a random number below 10^6: proxies
 * match transactions by branch and sent-by (RFC 3261 section 17.2.3), not Call-ID, so among
 * thousands of calls through one proxy two would collide and the second INVITE would be taken for
 * a retransmission. Its assignment is ignored here (a setter that keeps ours); the package reads
 * the branch back when it keys the transaction, so responses still match.
 */
function strongBranch(): sip.Via['params'] {
  const branch = `z9hG4bK${randomBytes(12).toString('hex')}`;
  const params: sip.Via['params'] = {};
  Object.defineProperty(params, 'branch', { enumerable: true, get: () => branch, set: () => undefined });
  return params;
}

/** Headers without which a message cannot be matched to a transaction. */
function wellFormed(message: sip.SipMessage): boolean {
  const h = message.headers;
  return Boolean((message.method || message.status) && Array.isArray(h.via) && h.via.length > 0 && h['call-id'] && h.to && h.from && h.cseq);
}

export class SipEndpoint {
  private readonly layer: sip.TransactionLayer;
  private udp: Promise<UdpSocket> | undefined;
  private tcp: Promise<Server> | undefined;
  private readonly connections = new Map<string, StreamConnection>();
  private closed = false;

  constructor(
    private readonly sip: SipLibrary,
    private readonly settings: SipEndpointSettings,
    /** A request from a peer; the answer goes back with respond(). */
    private readonly onRequest: (request: sip.SipMessage) => void,
    private readonly onError: (error: Error) => void = () => undefined,
  ) {
    this.layer = sip.makeTransactionLayer({});
  }

  /**
   * Binds what `transport` needs: the UDP socket for UDP, the TCP listener for TCP (the far end may
   * open a connection to our Contact for its in-dialog requests). TLS needs none: Dialtone has no
   * server certificate, so TLS peers send over the connection Dialtone opened (Via `alias`).
   * Rejects with a clear message when a port is taken; a later attempt tries again.
   */
  listen(transport: SipTransportName): Promise<void> {
    if (this.closed) return Promise.reject(new Error('The SIP endpoint is closed'));
    if (transport === 'tls') return Promise.resolve();
    if (transport === 'udp') {
      this.udp ??= this.bindUdp();
      this.udp.catch(() => (this.udp = undefined));
      return this.udp.then(() => undefined);
    }
    this.tcp ??= this.bindTcp();
    this.tcp.catch(() => (this.tcp = undefined));
    return this.tcp.then(() => undefined);
  }

  private bindUdp(): Promise<UdpSocket> {
    const { bindAddress, port } = this.settings;
    return new Promise((resolve, reject) => {
      const socket = createSocket(bindAddress.includes(':') ? 'udp6' : 'udp4');
      socket.once('error', (error) => {
        socket.close();
        reject(new Error(`The SIP UDP port ${bindAddress}:${port} cannot be bound: ${error.message}`));
      });
      socket.on('message', (data, remote) => this.onDatagram(socket, data, remote.address, remote.port));
      socket.bind(port, bindAddress, () => {
        socket.removeAllListeners('error');
        // After the bind, a socket error (an ICMP-driven send failure) concerns one datagram: report it, keep the socket.
        socket.on('error', (error) => this.onError(error));
        resolve(socket);
      });
    });
  }

  private bindTcp(): Promise<Server> {
    const { bindAddress, port } = this.settings;
    return new Promise((resolve, reject) => {
      const server = createServer((socket) => this.adopt(socket, 'TCP', `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`));
      server.once('error', (error) => {
        server.close();
        reject(new Error(`The SIP TCP port ${bindAddress}:${port} cannot be bound: ${error.message}`));
      });
      server.listen(port, bindAddress, () => {
        server.removeAllListeners('error');
        server.on('error', (error) => this.onError(error));
        resolve(server);
      });
    });
  }

  /** Sends a request in a new client transaction; a connection or resolution failure answers it 503. */
  request(message: sip.SipMessage, hop: Hop, tls: TlsPolicy, onResponse: (response: sip.SipMessage) => void): void {
    // A CANCEL carries the Via of the request it cancels (RFC 3261 section 9.1); others get a new one.
    if (message.method !== 'CANCEL') message.headers.via = [{ params: strongBranch() }, ...(message.headers.via ?? [])];
    const fail = (error: Error) => onResponse(this.sip.makeResponse(message, 503, `Service Unavailable (${error.message})`.slice(0, 200)));
    this.connect(hop, tls)
      .then((open) => {
        let client: sip.ClientTransaction | undefined;
        const connection = open((error) => client?.message(this.sip.makeResponse(message, 503, `Service Unavailable (${error.message})`.slice(0, 200))));
        client = this.layer.createClientTransaction(connection, message, onResponse);
      })
      .catch(fail);
  }

  /** Sends a request outside any transaction (the ACK of a 2xx, RFC 3261 section 13.2.2.4). */
  sendStateless(message: sip.SipMessage, hop: Hop, tls: TlsPolicy): void {
    message.headers.via = [{ params: { branch: `z9hG4bK${randomBytes(8).toString('hex')}` } }];
    this.connect(hop, tls)
      .then((open) => {
        const connection = open(this.onError);
        try {
          connection.send(message);
        } finally {
          connection.release();
        }
      })
      .catch(this.onError);
  }

  /** Answers a request received earlier (its server transaction retransmits and absorbs duplicates). */
  respond(response: sip.SipMessage): void {
    this.layer.getServer(response)?.send(response);
  }

  /**
   * Keeps the connection to `hop` open (for TCP and TLS) until the returned function is called: a
   * dialog holds it, so the far end can send its in-dialog requests over it.
   */
  async hold(hop: Hop, tls: TlsPolicy): Promise<() => void> {
    const open = await this.connect(hop, tls);
    const connection = open(() => undefined);
    return () => connection.release();
  }

  close(): void {
    this.closed = true;
    this.layer.destroy();
    for (const connection of this.connections.values()) connection.socket.destroy();
    this.connections.clear();
    void this.udp?.then((socket) => socket.close(), () => undefined);
    void this.tcp?.then((server) => server.close(), () => undefined);
  }

  /** Resolves the hop and returns a way to open a reference to its connection. */
  private async connect(hop: Hop, tls: TlsPolicy): Promise<(onError: (error: Error) => void) => sip.TransactionConnection> {
    if (this.closed) throw new Error('The SIP endpoint is closed');
    await this.listen(hop.transport);
    // The address family of the sockets: an IPv4 UDP socket cannot send to an AAAA answer.
    const address = isIpAddress(hop.host) ? hop.host : (await lookup(hop.host, { family: this.settings.bindAddress.includes(':') ? 6 : 4 })).address;
    if (hop.transport === 'udp') {
      const socket = await this.udp;
      if (!socket) throw new Error('The SIP UDP socket is not bound');
      return () => this.udpConnection(socket, address, hop.port);
    }
    const serverName = tls.serverName ?? (isIpAddress(hop.host) ? undefined : hop.host);
    const key = [hop.transport, address, hop.port, hop.transport === 'tls' ? `${serverName ?? ''}|${tls.ca ?? ''}` : ''].join('|');
    return (onError) => this.streamConnection(this.connections.get(key) ?? this.dial(key, hop.transport as 'tcp' | 'tls', address, hop.port, serverName, tls.ca), onError);
  }

  private udpConnection(socket: UdpSocket, address: string, port: number): sip.TransactionConnection {
    return {
      protocol: 'UDP',
      send: (message) => {
        this.stampVia(message, 'UDP');
        try {
          socket.send(Buffer.from(this.sip.stringify(message), 'binary'), port, address);
        } catch (error) {
          // A closed socket throws here, inside a retransmission timer: report it, never crash.
          this.onError(error as Error);
        }
      },
      release: () => undefined,
    };
  }

  private dial(key: string, transport: 'tcp' | 'tls', address: string, port: number, serverName: string | undefined, ca: string | undefined): StreamConnection {
    const socket =
      transport === 'tcp'
        ? tcpConnect({ host: address, port })
        : // Certificate checks stay on: rejectUnauthorized is Node's default and is not weakened here.
          tlsConnect({ host: address, port, ...(serverName ? { servername: serverName } : {}), ...(ca ? { ca } : {}), rejectUnauthorized: true });
    return this.adopt(socket, protocolOf(transport) as 'TCP' | 'TLS', `${address}:${port}`, key);
  }

  /** Tracks a stream (one we opened, or one a peer opened to our listener) and parses what arrives on it. */
  private adopt(socket: Socket, protocol: 'TCP' | 'TLS', peer: string, key = `${protocol.toLowerCase()}|${peer}|in`): StreamConnection {
    const connection: StreamConnection = { socket, protocol, key, refs: 0, failed: undefined, errorListeners: new Set(), idle: undefined };
    this.connections.set(key, connection);
    socket.setEncoding('binary');
    const parse = this.sip.makeStreamParser(
      (message) => this.onMessage(message, socket.remoteAddress ?? '', () => this.streamConnection(connection, () => undefined)),
      () => socket.destroy(new Error(`a SIP message over ${this.settings.maxMessageBytes ?? 65_535} bytes`)),
      this.settings.maxMessageBytes ?? 65_535,
      this.settings.maxMessageBytes ?? 65_535,
    );
    socket.on('data', (data: string) => parse(data));
    const fail = (error: Error) => {
      connection.failed ??= error;
      if (this.connections.get(key) === connection) this.connections.delete(key);
      for (const listener of [...connection.errorListeners]) listener(error);
    };
    socket.on('error', (error: Error & { reason?: string }) => fail(new Error(`${protocol} connection to ${peer} failed: ${error.reason ?? error.message}`)));
    socket.on('close', () => fail(new Error(`${protocol} connection to ${peer} closed`)));
    socket.on('end', () => socket.end());
    if (key.endsWith('|in')) this.idleClose(connection);
    return connection;
  }

  private streamConnection(connection: StreamConnection, onError: (error: Error) => void): sip.TransactionConnection {
    connection.refs += 1;
    if (connection.idle) clearTimeout(connection.idle);
    connection.idle = undefined;
    connection.errorListeners.add(onError);
    let released = false;
    return {
      protocol: connection.protocol,
      send: (message) => {
        if (connection.failed) {
          // Reported once through the listeners already; a retransmission has nowhere to go.
          return;
        }
        this.stampVia(message, connection.protocol);
        connection.socket.write(this.sip.stringify(message), 'binary');
      },
      release: () => {
        if (released) return;
        released = true;
        connection.errorListeners.delete(onError);
        connection.refs -= 1;
        if (connection.refs === 0) this.idleClose(connection);
      },
    };
  }

  private idleClose(connection: StreamConnection): void {
    connection.idle = setTimeout(() => {
      if (connection.refs > 0) return;
      if (this.connections.get(connection.key) === connection) this.connections.delete(connection.key);
      connection.socket.end();
    }, this.settings.idleMs ?? 30_000);
    connection.idle.unref();
  }

  /** Our Via for a request we send: our address and port, the transport it goes over. */
  private stampVia(message: sip.SipMessage, protocol: Protocol): void {
    const via = message.method ? message.headers.via?.[0] : undefined;
    if (!via) return;
    via.version = '2.0';
    via.protocol = protocol;
    via.host = this.settings.publicHost;
    via.port = this.settings.port;
    // UDP: ask for the response at the source port (RFC 3581). TCP and TLS: ask the peer to send its
    // own requests over this connection (RFC 5923), as Dialtone accepts no TLS connections.
    if (protocol === 'UDP') via.params.rport = null;
    else via.params.alias = null;
  }

  private onDatagram(socket: UdpSocket, data: Buffer, address: string, port: number): void {
    let message: sip.SipMessage | undefined;
    try {
      message = this.sip.parse(data);
    } catch {
      message = undefined;
    }
    if (!message) return;
    if (message.method && message.headers.via?.[0]) {
      const via = message.headers.via[0];
      via.params.received = address;
      if ('rport' in via.params) via.params.rport = String(port);
    }
    this.onMessage(message, address, () => this.udpConnection(socket, address, port));
  }

  /** Hands a message to its transaction, or a new request to the provider (as the `sip` package's create() does). */
  private onMessage(message: sip.SipMessage, remoteAddress: string, replyConnection: () => sip.TransactionConnection): void {
    if (this.closed || !wellFormed(message)) return;
    try {
      if (message.method && message.headers.via?.[0] && remoteAddress) message.headers.via[0].params.received = remoteAddress;
      const transaction = message.method ? this.layer.getServer(message) : this.layer.getClient(message);
      if (transaction) {
        transaction.message(message, { remote: true });
        return;
      }
      if (message.method === 'ACK') {
        this.onRequest(message);
      } else if (message.method) {
        this.layer.createServerTransaction(message, replyConnection());
        this.onRequest(message);
      }
    } catch (error) {
      this.onError(error as Error);
    }
  }
}
