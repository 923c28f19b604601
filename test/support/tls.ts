// A private certificate authority made with openssl for one test run: a CA, a server certificate for
// 127.0.0.1 / localhost signed by it, and a client certificate for mutual TLS. PEM text and file paths.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { scratchDir } from './scratch.ts';

export interface Pki {
  dir: string;
  ca: string;
  caFile: string;
  cert: string;
  certFile: string;
  key: string;
  keyFile: string;
  clientCert: string;
  clientCertFile: string;
  clientKey: string;
  clientKeyFile: string;
}

function openssl(args: string[], cwd: string): void {
  try {
    execFileSync('openssl', args, { cwd, stdio: 'ignore' });
  } catch (e) {
    throw new Error(`openssl ${args[0]} failed (apt-get install -y openssl): ${(e as Error).message}`);
  }
}

/** Makes a CA and two leaf certificates in a fresh temporary directory (a few hundred ms of openssl). */
export function makePki(): Pki {
  const dir = scratchDir('sluice-pki');
  const key = (name: string) => openssl(['genrsa', '-out', `${name}.key`, '2048'], dir);
  key('ca');
  openssl(
    ['req', '-x509', '-new', '-key', 'ca.key', '-days', '2', '-subj', '/CN=Sluice Test CA', '-out', 'ca.pem'],
    dir,
  );
  const leaf = (name: string, subject: string, ext: string) => {
    key(name);
    openssl(['req', '-new', '-key', `${name}.key`, '-subj', subject, '-out', `${name}.csr`], dir);
    writeFileSync(join(dir, `${name}.ext`), ext);
    openssl([
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
      '-out',
      `${name}.pem`,
    ], dir);
  };
  leaf('server', '/CN=127.0.0.1', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  leaf('client', '/CN=sluice-client', 'extendedKeyUsage=clientAuth\n');
  const read = (f: string) => readFileSync(join(dir, f), 'utf8');
  return {
    dir,
    ca: read('ca.pem'),
    caFile: join(dir, 'ca.pem'),
    cert: read('server.pem'),
    certFile: join(dir, 'server.pem'),
    key: read('server.key'),
    keyFile: join(dir, 'server.key'),
    clientCert: read('client.pem'),
    clientCertFile: join(dir, 'client.pem'),
    clientKey: read('client.key'),
    clientKeyFile: join(dir, 'client.key'),
  };
}
