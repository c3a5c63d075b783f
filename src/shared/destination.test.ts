// Reading pasted S3 addresses and showing destinations (shared by the wizard and the API schema).
import { describe, expect, it } from 'vitest';
import { describeDestination, isLoopbackUrl, parseS3Paste } from './destination.js';
import { destinationSchema } from './api.js';

describe('destination helpers', () => {
  it('reads pasted S3 addresses in the forms users write them', () => {
    expect(parseS3Paste('s3:https://s3.example.com:9000/office/pcs/one/')).toEqual({
      endpoint: 'https://s3.example.com:9000',
      bucket: 'office',
      prefix: 'pcs/one',
    });
    expect(parseS3Paste(' nas.local/backups ')).toEqual({
      endpoint: 'https://nas.local',
      bucket: 'backups',
      prefix: '',
    });
    expect(parseS3Paste('s3://my-bucket/tm?region=eu-west-1&style=virtual')).toEqual({
      endpoint: 'https://s3.amazonaws.com',
      bucket: 'my-bucket',
      prefix: 'tm',
      region: 'eu-west-1',
      pathStyle: false,
    });
    expect(parseS3Paste('s3:https://host.example')).toEqual({ error: expect.stringMatching(/no bucket/) });
    expect(parseS3Paste('s3:https://key:secret@host/b')).toEqual({
      error: expect.stringMatching(/key fields/),
    });
  });

  it('tells loopback hosts apart and shows destinations as host/bucket/prefix', () => {
    expect(isLoopbackUrl('http://127.0.0.1:7480')).toBe(true);
    expect(isLoopbackUrl('http://[::1]:9000')).toBe(true);
    expect(isLoopbackUrl('http://nas.local')).toBe(false);
    expect(
      describeDestination({ kind: 's3', endpoint: 'https://s3.example.com', bucket: 'b', prefix: 'p/q' }),
    ).toBe('s3.example.com/b/p/q');
    expect(describeDestination({ kind: 'local', path: '/mnt/usb' })).toBe('/mnt/usb');
  });

  it('keeps old local destinations valid and checks S3 ones (https unless loopback or allowed)', () => {
    expect(destinationSchema.parse({ kind: 'local', path: '/mnt/usb' })).toEqual({
      kind: 'local',
      path: '/mnt/usb',
    });
    const s3 = { kind: 's3', endpoint: 'http://nas.local:9000', bucket: 'office', accessKeyId: 'AK' };
    expect(destinationSchema.safeParse(s3).success).toBe(false);
    expect(destinationSchema.parse({ ...s3, allowInsecureHttp: true })).toMatchObject({
      prefix: '',
      pathStyle: true,
    });
    expect(destinationSchema.safeParse({ ...s3, endpoint: 'http://localhost:9000' }).success).toBe(true);
    expect(
      destinationSchema.safeParse({ ...s3, endpoint: 'https://nas.local', prefix: 'a/../b' }).success,
    ).toBe(false);
  });
});
