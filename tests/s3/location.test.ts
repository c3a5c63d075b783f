/**
 * The engine's strict S3 location reader and the wizard's lenient paste box share one splitter: they
 * agree on the pieces of a well-formed address and differ only in what they refuse.
 */
import { describe, it, expect } from 'vitest';
import { parseS3Location } from '../../src/main/engine/backend/s3/location.js';
import { parseS3Paste } from '../../src/shared/destination.js';

describe('S3 locations', () => {
  it('reads endpoint, bucket, prefix and options the same way in the engine and the wizard', () => {
    const text = 's3:https://s3.example.com:9000/office/pcs/one/?region=eu-west-1&style=path';
    expect(parseS3Location(text)).toEqual({
      endpoint: 'https://s3.example.com:9000',
      bucket: 'office',
      prefix: 'pcs/one',
      region: 'eu-west-1',
      pathStyle: true,
    });
    expect(parseS3Paste(text)).toEqual({
      endpoint: 'https://s3.example.com:9000',
      bucket: 'office',
      prefix: 'pcs/one',
      region: 'eu-west-1',
      pathStyle: true,
    });
    expect(parseS3Location('s3:nas.local/backups')).toEqual({
      endpoint: 'https://nas.local',
      bucket: 'backups',
      prefix: '',
    });
    // AWS S3 itself: no endpoint in the engine, the AWS one filled in by the wizard
    expect(parseS3Location('s3://my-bucket/tm')).toEqual({ bucket: 'my-bucket', prefix: 'tm' });
    expect(parseS3Paste('s3://my-bucket/tm')).toMatchObject({ endpoint: 'https://s3.amazonaws.com' });
  });

  it('the engine refuses what the wizard tolerates, with the reason', () => {
    expect(() => parseS3Location('s3:https://key:secret@host/b')).toThrow(/key fields/);
    expect(parseS3Paste('s3:https://key:secret@host/b')).toEqual({
      error: expect.stringMatching(/key fields/),
    });
    expect(() => parseS3Location('s3:https://host.example')).toThrow(/names no bucket/);
    expect(() => parseS3Location('s3:https://host/Bad*Bucket')).toThrow(/not a valid bucket name/);
    expect(() => parseS3Location('s3:https://host/bkt?colour=blue')).toThrow(/unknown S3 location option/);
    expect(parseS3Paste('s3:https://host/b?colour=blue')).toEqual({
      endpoint: 'https://host',
      bucket: 'b',
      prefix: '',
    });
    expect(() => parseS3Location('s3:https://host/bkt/../x')).toThrow(/invalid S3 prefix/);
    expect(() => parseS3Location('s3:')).toThrow(/cannot read the S3 location/);
    expect(() => parseS3Location('/just/a/folder')).toThrow(/not an S3 location/);
  });
});
