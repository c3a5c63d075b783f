/**
 * Choosing a folder: the native dialog in Electron, or a directory browser served by the engine in
 * browser mode (the browser cannot see the server's disks).
 */
import { useCallback, useEffect, useRef, useState } from 'react';
import { api, errorMessage, type DirListing } from '../api';
import { useApp } from '../stores/app';
import { Icon } from './Icon';
import { Modal } from './ui';

export function DirBrowser({
  title,
  start,
  onPick,
  onClose,
}: {
  title: string;
  start?: string;
  onPick: (path: string) => void;
  onClose: () => void;
}) {
  const [listing, setListing] = useState<DirListing | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [typed, setTyped] = useState('');
  const seq = useRef(0);
  const edits = useRef(0);
  const go = useCallback(async (path?: string) => {
    // only the latest request may update the view (a slow first listing must not replace a later one)
    const mine = ++seq.current;
    const editsBefore = edits.current;
    try {
      const l = await api.call('fs.listDirs', { path });
      if (mine !== seq.current) return;
      setListing(l);
      // nor replace a path typed while it was on its way (typing before the first listing came back)
      if (edits.current === editsBefore) setTyped(l.path);
      setError(null);
    } catch (err) {
      if (mine === seq.current) setError(errorMessage(err));
    }
  }, []);
  useEffect(() => {
    void go(start || undefined);
  }, [go, start]);
  return (
    <Modal
      title={title}
      onClose={onClose}
      footer={
        <>
          <button className="button" onClick={onClose}>
            Cancel
          </button>
          <button
            className="button primary"
            disabled={!listing}
            onClick={() => listing && onPick(listing.path)}
          >
            Choose this folder
          </button>
        </>
      }
    >
      <div className="dir-roots" role="group" aria-label="Places">
        {listing?.roots.map((r) => (
          <button key={r.path} className="chip" onClick={() => void go(r.path)}>
            <Icon name={r.label === 'Home' ? 'dashboard' : 'drive'} size={14} /> {r.label}
          </button>
        ))}
      </div>
      <form
        className="dir-path"
        onSubmit={(e) => {
          e.preventDefault();
          void go(typed);
        }}
      >
        <button
          type="button"
          className="icon-button"
          aria-label="Parent folder"
          disabled={!listing?.parent}
          onClick={() => listing?.parent && void go(listing.parent)}
        >
          <Icon name="up" />
        </button>
        <input
          aria-label="Folder path"
          value={typed}
          onChange={(e) => {
            edits.current++;
            setTyped(e.target.value);
          }}
          spellCheck={false}
        />
        <button className="button" type="submit">
          Go
        </button>
      </form>
      {error ? (
        <p className="error-text" role="alert">
          {error}
        </p>
      ) : null}
      <ul className="dir-list" aria-label="Folders">
        {listing?.entries.length === 0 ? <li className="muted dir-none">No folders here</li> : null}
        {listing?.entries.map((e) => (
          <li key={e.path}>
            <button className="dir-item" onClick={() => void go(e.path)} onDoubleClick={() => onPick(e.path)}>
              <Icon name="folder" size={16} /> {e.name}
            </button>
          </li>
        ))}
      </ul>
    </Modal>
  );
}

/** A path text field with a "Browse…" button. */
export function FolderInput({
  id,
  value,
  onChange,
  label,
  placeholder,
}: {
  id: string;
  value: string;
  onChange: (v: string) => void;
  label: string;
  placeholder?: string;
}) {
  const info = useApp((s) => s.info);
  const [open, setOpen] = useState(false);
  const browse = async () => {
    if (info?.nativePicker) {
      const p = await api.call('fs.pickFolder', { title: label });
      if (p) onChange(p);
    } else setOpen(true);
  };
  return (
    <div className="folder-input">
      <input
        id={id}
        aria-label={label}
        value={value}
        placeholder={placeholder}
        onChange={(e) => onChange(e.target.value)}
        spellCheck={false}
      />
      <button
        type="button"
        className="button"
        onClick={() => void browse()}
        aria-label={`Browse for ${label.toLowerCase()}`}
      >
        <Icon name="folder" size={16} /> Browse…
      </button>
      {open ? (
        <DirBrowser
          title={label}
          start={value || undefined}
          onClose={() => setOpen(false)}
          onPick={(p) => {
            onChange(p);
            setOpen(false);
          }}
        />
      ) : null}
    </div>
  );
}
