/**
 * The renderer's only way to the engine. In Electron the preload script exposes `window.tidemark`
 * (IPC); in a browser the same calls go over the WebSocket of browser mode. Both speak the shared
 * contract, and errors arrive as ApiError with the engine's name and code.
 */
import {
  ApiError,
  type ApiArgs,
  type ApiClient,
  type ApiEvent,
  type ApiEvents,
  type ApiMethod,
  type ApiResults,
  type PreloadBridge,
  type WsClientMessage,
  type WsServerMessage,
} from '../../../shared/api';

export { ApiError };
export { jobInputSchema, excludePresetPatterns } from '../../../shared/api';
export type * from '../../../shared/api';

type Listener = (payload: unknown) => void;

class Listeners {
  private map = new Map<string, Set<Listener>>();
  on(event: string, l: Listener): () => void {
    let set = this.map.get(event);
    if (!set) this.map.set(event, (set = new Set()));
    set.add(l);
    return () => set.delete(l);
  }
  emit(event: string, payload: unknown): void {
    for (const l of this.map.get(event) ?? []) l(payload);
  }
}

function ipcClient(bridge: PreloadBridge): ApiClient {
  return {
    async call(method, args) {
      const r = await bridge.call(method, args);
      if (!r.ok) throw new ApiError(r.error);
      return r.result as never;
    },
    on(event, listener) {
      return bridge.on(event, listener as Listener);
    },
  };
}

/** Connection state of the browser-mode socket, for the UI's banner. */
export type ConnectionState = 'connecting' | 'open' | 'closed';

class WsClient implements ApiClient {
  private ws?: WebSocket;
  private next = 1;
  private pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>();
  private queue: string[] = [];
  private listeners = new Listeners();
  private retry = 500;
  state: ConnectionState = 'connecting';

  constructor(private url: string) {
    this.open();
  }

  private setState(s: ConnectionState) {
    this.state = s;
    this.listeners.emit('$connection', s);
  }

  private open() {
    const ws = new WebSocket(this.url);
    this.ws = ws;
    this.setState('connecting');
    ws.onopen = () => {
      this.retry = 500;
      this.setState('open');
      for (const m of this.queue.splice(0)) ws.send(m);
      this.listeners.emit('$reconnected', null);
    };
    ws.onmessage = (e) => {
      const m = JSON.parse(String(e.data)) as WsServerMessage;
      if ('event' in m) {
        this.listeners.emit(m.event, m.payload);
        return;
      }
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.ok) p.resolve(m.result);
      else p.reject(new ApiError(m.error));
    };
    ws.onclose = () => {
      this.setState('closed');
      for (const p of this.pending.values())
        p.reject(
          new ApiError({
            name: 'ConnectionError',
            code: 'DISCONNECTED',
            message: 'lost the connection to Tidemark',
          }),
        );
      this.pending.clear();
      // their callers were told: nothing of theirs goes out later (a queue that grew while the server
      // was away would also be sent all at once)
      this.queue.length = 0;
      setTimeout(() => this.open(), this.retry);
      this.retry = Math.min(this.retry * 2, 10_000);
    };
  }

  call<M extends ApiMethod>(method: M, args: ApiArgs[M]): Promise<ApiResults[M]> {
    const id = this.next++;
    const msg: WsClientMessage = { id, method, args };
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      const text = JSON.stringify(msg);
      if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(text);
      else this.queue.push(text);
    });
  }

  on<E extends ApiEvent>(event: E, listener: (payload: ApiEvents[E]) => void): () => void {
    return this.listeners.on(event, listener as Listener);
  }

  onConnection(listener: (s: ConnectionState) => void): () => void {
    return this.listeners.on('$connection', listener as Listener);
  }
}

declare global {
  interface Window {
    tidemark?: PreloadBridge;
  }
}

function createClient(): ApiClient & { onConnection?: (l: (s: ConnectionState) => void) => () => void } {
  if (window.tidemark) return ipcClient(window.tidemark);
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return new WsClient(`${proto}//${location.host}/ws`);
}

export const api = createClient();
export const transport: 'ipc' | 'websocket' = window.tidemark ? 'ipc' : 'websocket';

/** A readable message for any error thrown by a call. */
export function errorMessage(err: unknown): string {
  if (err instanceof ApiError) return err.message;
  if (err instanceof Error) return err.message;
  return String(err);
}
